// Tests of the IDX parser and the `mnist` data plugin: good files in both naming conventions,
// raw and gzip; every corruption the reader must catch, with its message text; the real Debian
// Fashion-MNIST files when installed.
//
// The parser is compiled into this test (idx_reader.cpp); the plugin is loaded directly with
// Boost.DLL and its descriptor's factory, independent of the core's plugin registry.
#define KILN_TEST_MODULE test_idx
#include "kiln_test_main.hpp"

#include <zlib.h>

#include <boost/dll/shared_library.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "idx_reader.hpp"
#include "kiln/data_source.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/plugin_args.hpp"

namespace fs = std::filesystem;
using kiln::mnist::IdxArray;

namespace {

const char* const kDebianDir = "/usr/share/datasets/fashion-mnist";

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-test-idx-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

using Bytes = std::vector<std::uint8_t>;

Bytes idx_header(std::uint8_t type, const std::vector<std::uint32_t>& dims) {
  Bytes b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    b.push_back(static_cast<std::uint8_t>(d >> 24));
    b.push_back(static_cast<std::uint8_t>(d >> 16));
    b.push_back(static_cast<std::uint8_t>(d >> 8));
    b.push_back(static_cast<std::uint8_t>(d));
  }
  return b;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Deterministic pixels: image i, pixel j -> (7 i + 3 j) mod 256.
Bytes pixels(std::uint32_t count, std::uint32_t side = 28) {
  Bytes p(static_cast<std::size_t>(count) * side * side);
  for (std::size_t k = 0; k < p.size(); ++k) {
    const std::size_t i = k / (side * side), j = k % (side * side);
    p[k] = static_cast<std::uint8_t>((7 * i + 3 * j) % 256);
  }
  return p;
}

Bytes images_file(std::uint32_t count, std::uint32_t side = 28) {
  return concat(idx_header(0x08, {count, side, side}), pixels(count, side));
}

Bytes labels_file(const Bytes& labels) {
  return concat(idx_header(0x08, {static_cast<std::uint32_t>(labels.size())}), labels);
}

void write_raw(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE(f.good());
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  BOOST_REQUIRE(f != nullptr);
  BOOST_REQUIRE_EQUAL(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
                      static_cast<int>(bytes.size()));
  BOOST_REQUIRE_EQUAL(gzclose(f), Z_OK);
}

Bytes read_raw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Asserts that `fn` throws a kiln::DataError whose message contains `expected`.
template <class Fn>
void check_data_error(Fn&& fn, const std::string& expected) {
  try {
    fn();
    BOOST_ERROR("no DataError thrown; expected a message containing: " << expected);
  } catch (const kiln::DataError& e) {
    BOOST_TEST_INFO("message: " << e.what());
    BOOST_CHECK(std::string(e.what()).find(expected) != std::string::npos);
  }
}

IdxArray parse(const Bytes& bytes, int ndims = 3, const char* what = "pixels") {
  return kiln::mnist::parse_idx_u8(bytes, "/data/x-idx", ndims, what);
}

// ---- the plugin, loaded directly ----------------------------------------------------------

struct MnistPlugin {
  boost::dll::shared_library library;
  const kiln_plugin_v1* plugin = nullptr;

  MnistPlugin()
      : library(std::string(KILN_TEST_PLUGIN_DIR) + "/libkiln-data-mnist.so",
                boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local) {
    const void* raw = library.get<const void*>(KILN_LIBRARY_SYMBOL);
    const auto* lib = static_cast<const kiln_library_v1*>(raw);
    BOOST_REQUIRE_EQUAL(lib->abi_major, KILN_ABI_MAJOR);
    BOOST_REQUIRE_EQUAL(lib->num_plugins, 1u);
    plugin = &lib->plugins[0];
    BOOST_REQUIRE_EQUAL(std::string(plugin->name), "mnist");
    BOOST_REQUIRE_EQUAL(plugin->kind, static_cast<std::uint32_t>(KILN_KIND_DATA));
  }
};

// Libraries stay loaded until exit, as in the real loader.
const MnistPlugin& mnist_plugin() {
  static const MnistPlugin* plugin = new MnistPlugin();
  return *plugin;
}

using SourcePtr = std::unique_ptr<kiln::DataSource, void (*)(kiln::DataSource*)>;

// The parameter table as the core would hand it over: every key present, defaults filled in.
kiln::ParamMap mnist_params(const std::string& path) {
  kiln::ParamMap p("data.train");
  p.set("path", std::string(path), "test.toml:2");
  p.set("split", std::string("train"), "default");
  p.set("mean", 0.0, "default");
  p.set("std", 1.0, "default");
  p.set("flatten", true, "default");
  p.set("limit", std::int64_t{0}, "default");
  p.set("num_classes", std::int64_t{10}, "default");
  p.set("class_names", std::vector<std::string>{}, "default");
  return p;
}

SourcePtr make_source(const kiln::ParamMap& params) {
  const MnistPlugin& m = mnist_plugin();
  kiln::PluginArgs args;
  args.params = &params;
  void* object = m.plugin->create(&args);
  return SourcePtr(static_cast<kiln::DataSource*>(object), [](kiln::DataSource* s) {
    mnist_plugin().plugin->destroy(KILN_KIND_DATA, s);
  });
}

std::vector<float> read_sample(const kiln::DataSource& source, std::int64_t index,
                               std::int32_t& label) {
  std::vector<float> out(784);
  source.read(index, 0, kiln::SampleSlot{out.data(), out.size() * sizeof(float), &label});
  return out;
}

const Bytes kFiveLabels{3, 1, 4, 1, 5};

// Writes a good 5-sample train split into `dir` with the given naming and compression.
enum class Naming { dashed, dotted };
enum class Compression { raw, gzip };
void write_split(const TempDir& dir, const std::string& prefix, Naming naming, Compression comp) {
  const char* sep = naming == Naming::dashed ? "-" : ".";
  const std::string gz = comp == Compression::gzip ? ".gz" : "";
  const auto write = comp == Compression::gzip ? write_gz : write_raw;
  write(dir.file(prefix + "-images" + sep + "idx3-ubyte" + gz), images_file(5));
  write(dir.file(prefix + "-labels" + sep + "idx1-ubyte" + gz), labels_file(kFiveLabels));
}

}  // namespace

// ---- parser: good files -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(parses_a_good_raw_file) {
  TempDir dir;
  write_raw(dir.file("a"), images_file(3));
  const IdxArray a = kiln::mnist::read_idx_u8(dir.file("a"), 3, "pixels");
  BOOST_TEST(a.dims == (std::vector<std::int64_t>{3, 28, 28}), boost::test_tools::per_element());
  BOOST_TEST(a.data == pixels(3), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(parses_a_good_gzip_file_and_concatenated_members) {
  TempDir dir;
  write_gz(dir.file("a.gz"), images_file(4));
  const IdxArray a = kiln::mnist::read_idx_u8(dir.file("a.gz"), 3, "pixels");
  BOOST_TEST(a.dims == (std::vector<std::int64_t>{4, 28, 28}), boost::test_tools::per_element());
  BOOST_TEST(a.data == pixels(4), boost::test_tools::per_element());

  // `cat part1.gz part2.gz` is a valid gzip file holding both parts.
  const Bytes whole = labels_file({0, 1, 2, 3, 4, 5, 6});
  write_gz(dir.file("p1.gz"), Bytes(whole.begin(), whole.begin() + 6));
  write_gz(dir.file("p2.gz"), Bytes(whole.begin() + 6, whole.end()));
  write_raw(dir.file("both.gz"), concat(read_raw(dir.file("p1.gz")), read_raw(dir.file("p2.gz"))));
  const IdxArray l = kiln::mnist::read_idx_u8(dir.file("both.gz"), 1, "labels");
  BOOST_TEST(l.data == (Bytes{0, 1, 2, 3, 4, 5, 6}), boost::test_tools::per_element());
}

// ---- parser: every corruption, with its message -------------------------------------------

BOOST_AUTO_TEST_CASE(rejects_wrong_magic) {
  Bytes b = images_file(1);
  b[0] = 0x01;
  check_data_error([&] { parse(b); },
                   "/data/x-idx: not an IDX file: the magic number starts with 01 00, expected 00 00");
}

BOOST_AUTO_TEST_CASE(rejects_unknown_and_wrong_type_codes) {
  Bytes b = images_file(1);
  b[2] = 0x42;
  check_data_error([&] { parse(b); }, "/data/x-idx: unknown IDX type code 0x42");
  b[2] = 0x0D;
  check_data_error([&] { parse(b); },
                   "/data/x-idx: IDX type code 0x0d (f32), but MNIST pixels must be 0x08 (unsigned byte)");
}

BOOST_AUTO_TEST_CASE(rejects_wrong_number_of_dimensions) {
  const Bytes b = concat(idx_header(0x08, {2, 784}), pixels(2));
  check_data_error([&] { parse(b); },
                   "/data/x-idx: the IDX header declares 2 dimensions, but MNIST pixels have 3");
  check_data_error([&] { parse(labels_file({1, 2}), 3, "pixels"); },
                   "declares 1 dimensions, but MNIST pixels have 3");
}

BOOST_AUTO_TEST_CASE(rejects_zero_and_huge_dimensions) {
  check_data_error([&] { parse(idx_header(0x08, {5, 0, 28})); },
                   "/data/x-idx: dimension 1 of the IDX header is 0; the file holds no pixels");
  check_data_error([&] { parse(idx_header(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 28})); },
                   "/data/x-idx: dimension 0 of the IDX header is 4294967295, which makes more than "
                   "2147483648 bytes of pixels; the header is corrupt");
  check_data_error([&] { parse(idx_header(0x08, {60000, 60000, 28})); },
                   "dimension 1 of the IDX header is 60000, which makes more than 2147483648 bytes");
}

BOOST_AUTO_TEST_CASE(rejects_truncated_headers) {
  check_data_error([&] { parse(Bytes{0, 0}); },
                   "/data/x-idx: truncated: the file has 2 bytes, fewer than the 4-byte IDX magic number");
  const Bytes h = idx_header(0x08, {5, 28, 28});
  check_data_error([&] { parse(Bytes(h.begin(), h.begin() + 10)); },
                   "/data/x-idx: truncated: the IDX header of 3 dimensions needs 16 bytes but the file has 10");
}

BOOST_AUTO_TEST_CASE(rejects_truncated_payload_in_a_gzip_file) {
  TempDir dir;
  const std::string path = dir.file("train-images-idx3-ubyte.gz");
  write_gz(path, concat(idx_header(0x08, {60000, 28, 28}), Bytes(1234, 7)));
  check_data_error([&] { kiln::mnist::read_idx_u8(path, 3, "pixels"); },
                   path + ": truncated: header says 60000 x 28 x 28 = 47040000 bytes of pixels but "
                          "the file has 1234 after the 16-byte header");
}

BOOST_AUTO_TEST_CASE(rejects_trailing_bytes) {
  check_data_error([&] { parse(concat(images_file(5), Bytes{1, 2, 3})); },
                   "/data/x-idx: 3 trailing bytes: header says 5 x 28 x 28 = 3920 bytes of pixels "
                   "but the file has 3923 after the 16-byte header");
  check_data_error([&] { parse(concat(labels_file({1, 2}), Bytes{9}), 1, "labels"); },
                   "/data/x-idx: 1 trailing bytes: header says 2 bytes of labels but the file has 3 "
                   "after the 8-byte header");
}

BOOST_AUTO_TEST_CASE(rejects_truncated_and_corrupt_gzip) {
  TempDir dir;
  const std::string full = dir.file("full.gz");
  write_gz(full, images_file(20));
  const Bytes gz = read_raw(full);

  const std::string cut = dir.file("cut.gz");
  write_raw(cut, Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2)));
  check_data_error([&] { kiln::mnist::read_idx_u8(cut, 3, "pixels"); },
                   cut + ": truncated gzip stream: the input ends after " +
                       std::to_string(gz.size() / 2) + " compressed bytes");

  // Only the 8-byte trailer (CRC, length) missing: still truncated.
  const std::string no_trailer = dir.file("no-trailer.gz");
  write_raw(no_trailer, Bytes(gz.begin(), gz.end() - 8));
  check_data_error([&] { kiln::mnist::read_idx_u8(no_trailer, 3, "pixels"); },
                   "truncated gzip stream");

  const std::string garbage = dir.file("garbage.gz");
  write_raw(garbage, concat(gz, Bytes{0, 0, 0}));
  check_data_error([&] { kiln::mnist::read_idx_u8(garbage, 3, "pixels"); },
                   garbage + ": 3 bytes of garbage after the end of the gzip stream");

  Bytes flipped = gz;
  flipped[gz.size() - 6] ^= 0xFF;  // inside the stored CRC-32: the check at the end fails
  const std::string bad = dir.file("bad.gz");
  write_raw(bad, flipped);
  check_data_error([&] { kiln::mnist::read_idx_u8(bad, 3, "pixels"); }, bad + ": corrupt gzip data");
}

// Exhaustive small corruptions: every prefix, every value of every header byte, every cut of
// the gzip stream. Each must either parse to exactly the right size or throw DataError (run
// under ASan this also proves nothing is read out of bounds).
BOOST_AUTO_TEST_CASE(never_crashes_on_any_header_byte_or_cut) {
  const Bytes good = images_file(2);
  for (std::size_t n = 0; n < good.size(); ++n) {
    BOOST_CHECK_THROW(parse(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n))),
                      kiln::DataError);
  }
  for (std::size_t at = 0; at < 16; ++at) {
    for (int v = 0; v < 256; ++v) {
      Bytes b = good;
      b[at] = static_cast<std::uint8_t>(v);
      try {
        const IdxArray a = parse(b);
        std::int64_t elements = 1;
        for (std::int64_t d : a.dims) elements *= d;
        BOOST_REQUIRE_EQUAL(static_cast<std::size_t>(elements), b.size() - 16);
        BOOST_REQUIRE_EQUAL(a.data.size(), b.size() - 16);
      } catch (const kiln::DataError&) {
      }
    }
  }
  TempDir dir;
  write_gz(dir.file("full.gz"), good);
  const Bytes gz = read_raw(dir.file("full.gz"));
  for (std::size_t n = 2; n < gz.size(); ++n) {
    write_raw(dir.file("cut.gz"), Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(n)));
    BOOST_CHECK_THROW(kiln::mnist::read_idx_u8(dir.file("cut.gz"), 3, "pixels"), kiln::DataError);
  }
}

BOOST_AUTO_TEST_CASE(reports_a_missing_file) {
  check_data_error([] { kiln::mnist::read_idx_u8("/nonexistent/kiln/x-idx", 3, "pixels"); },
                   "/nonexistent/kiln/x-idx: cannot open: No such file or directory");
}

// ---- the plugin ---------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(plugin_reads_both_naming_conventions_raw_and_gzip) {
  for (Naming naming : {Naming::dashed, Naming::dotted}) {
    for (Compression comp : {Compression::raw, Compression::gzip}) {
      TempDir dir;
      write_split(dir, "train", naming, comp);
      kiln::ParamMap p = mnist_params(dir.path().string());
      p.set("mean", 0.5, "test.toml:4");
      p.set("std", 0.25, "test.toml:5");
      SourcePtr source = make_source(p);
      const kiln::DatasetInfo info = source->describe();
      BOOST_CHECK_EQUAL(source->name(), "mnist");
      BOOST_CHECK_EQUAL(info.count, 5);
      BOOST_CHECK_EQUAL(info.num_classes, 10);
      BOOST_TEST(info.sample_shape == (kiln::Shape{784}), boost::test_tools::per_element());
      BOOST_CHECK(info.sample_dtype == kiln::DType::f32);
      BOOST_CHECK_EQUAL(info.description,
                        "MNIST train: 5 samples from " + dir.path().string());

      const Bytes expected = pixels(5);
      for (std::int64_t i = 0; i < 5; ++i) {
        std::int32_t label = -1;
        const std::vector<float> x = read_sample(*source, i, label);
        BOOST_CHECK_EQUAL(label, kFiveLabels[static_cast<std::size_t>(i)]);
        for (std::size_t j = 0; j < 784; j += 97) {
          const double want = (expected[static_cast<std::size_t>(i) * 784 + j] / 255.0 - 0.5) / 0.25;
          BOOST_CHECK_SMALL(x[j] - want, 1e-6);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(plugin_test_split_limit_and_shape) {
  TempDir dir;
  write_split(dir, "t10k", Naming::dashed, Compression::gzip);
  kiln::ParamMap p = mnist_params(dir.path().string());
  p.set("split", std::string("test"), "test.toml:3");
  p.set("flatten", false, "test.toml:6");
  p.set("limit", std::int64_t{2}, "test.toml:7");
  SourcePtr source = make_source(p);
  const kiln::DatasetInfo info = source->describe();
  BOOST_CHECK_EQUAL(info.count, 2);
  BOOST_TEST(info.sample_shape == (kiln::Shape{1, 28, 28}), boost::test_tools::per_element());
  BOOST_CHECK_EQUAL(info.description,
                    "MNIST test: 2 samples from " + dir.path().string() + " (limit 2 of 5)");
  std::int32_t label = -1;
  read_sample(*source, 1, label);
  BOOST_CHECK_EQUAL(label, 1);
  check_data_error([&] { read_sample(*source, 2, label); }, "sample index 2 is out of range [0, 2)");
  check_data_error([&] { read_sample(*source, -1, label); }, "sample index -1 is out of range");
  std::vector<float> small(10);
  check_data_error([&] { source->read(0, 0, kiln::SampleSlot{small.data(), 40, &label}); },
                   "mnist: sample 0 asked into a slot of 40 bytes; it needs 3136 bytes");
}

BOOST_AUTO_TEST_CASE(plugin_passes_class_names_and_wants_one_per_class) {
  TempDir dir;
  write_split(dir, "train", Naming::dashed, Compression::raw);
  kiln::ParamMap p = mnist_params(dir.path().string());
  BOOST_TEST(make_source(p)->describe().class_names.empty());  // the default: none
  const std::vector<std::string> names = {"zero", "one", "two", "three", "four",
                                          "five", "six", "seven", "eight", "nine"};
  p.set("class_names", names, "test.toml:9");
  BOOST_TEST(make_source(p)->describe().class_names == names, boost::test_tools::per_element());
  // Nine names for ten classes would leave label 9 unnamed: refused, naming the key.
  p.set("class_names", std::vector<std::string>(names.begin(), names.end() - 1), "test.toml:9");
  try {
    (void)make_source(p);
    BOOST_ERROR("nine names for ten classes were accepted");
  } catch (const kiln::ConfigError& e) {
    BOOST_TEST(std::string(e.what()) ==
               "data.train.class_names (test.toml:9) has 9 names for num_classes = 10; give one per class, label 0 "
               "first");
  }
}

BOOST_AUTO_TEST_CASE(plugin_lists_the_candidates_when_no_file_exists) {
  TempDir dir;
  const std::string d = dir.path().string();
  check_data_error([&] { make_source(mnist_params(d)); },
                   d + ": no train images file; tried train-images-idx3-ubyte, "
                       "train-images-idx3-ubyte.gz, train-images.idx3-ubyte and "
                       "train-images.idx3-ubyte.gz; set data.train.path (test.toml:2) to the folder");
  write_raw(dir.file("train-images-idx3-ubyte"), images_file(5));
  check_data_error([&] { make_source(mnist_params(d)); },
                   "no train labels file; tried train-labels-idx1-ubyte, train-labels-idx1-ubyte.gz");
  check_data_error([&] { make_source(mnist_params(d + "/missing")); },
                   "data.train.path (test.toml:2): \"" + d + "/missing\" is not a directory");
}

BOOST_AUTO_TEST_CASE(plugin_rejects_inconsistent_files) {
  TempDir dir;
  const std::string d = dir.path().string();
  const std::string images = dir.file("train-images-idx3-ubyte");
  const std::string labels = dir.file("train-labels-idx1-ubyte");

  write_raw(images, images_file(5));
  write_raw(labels, labels_file({1, 2, 3, 4}));
  check_data_error([&] { make_source(mnist_params(d)); },
                   images + " has 5 images but " + labels + " has 4 labels");

  write_raw(labels, labels_file({1, 2, 3, 10, 4}));
  check_data_error([&] { make_source(mnist_params(d)); },
                   labels + ": label 10 of sample 3 is out of range for num_classes = 10 "
                            "(data.train.num_classes (default))");

  write_raw(images, images_file(5, 32));
  write_raw(labels, labels_file(kFiveLabels));
  check_data_error([&] { make_source(mnist_params(d)); },
                   images + ": images are 32 x 32, but MNIST images are 28 x 28");

  write_raw(images, concat(idx_header(0x08, {5, 28, 28}), Bytes(100, 0)));
  check_data_error([&] { make_source(mnist_params(d)); },
                   images + ": truncated: header says 5 x 28 x 28 = 3920 bytes of pixels but the "
                            "file has 100 after the 16-byte header");
}

// The value ranges live in the schema, which the core checks before the factory runs (and
// `kiln plugins show` prints); the plugin keeps only the checks a range cannot express.
BOOST_AUTO_TEST_CASE(plugin_schema_declares_value_ranges) {
  const kiln_plugin_v1& m = *mnist_plugin().plugin;
  auto spec = [&](const std::string& name) -> const kiln_param_spec_v1& {
    for (std::uint32_t i = 0; i < m.num_params; ++i) {
      if (name == m.params[i].name) return m.params[i];
    }
    BOOST_FAIL("no parameter " + name);
    return m.params[0];
  };
  auto text = [](const char* s) { return s ? std::string(s) : std::string("NULL"); };
  BOOST_TEST(text(spec("std").min) == "0");
  BOOST_TEST(text(spec("std").max) == "NULL");
  BOOST_TEST(spec("std").flags == KILN_PARAM_MIN_EXCLUSIVE);  // > 0, finite
  BOOST_TEST(spec("mean").flags == 0u);                        // any finite value
  BOOST_TEST(text(spec("limit").min) == "0");
  BOOST_TEST(text(spec("num_classes").min) == "1");
  BOOST_TEST(text(spec("num_classes").max) == "256");
}

// ---- the real Debian files ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(reads_the_debian_fashion_mnist_files) {
  if (!fs::is_directory(kDebianDir)) {
    BOOST_TEST_MESSAGE("skipped: " << kDebianDir << " is not installed (apt install fashion-mnist)");
    return;
  }
  struct Expect { const char* split; std::int64_t count; std::int32_t first_label; std::int64_t first_sum; };
  for (const Expect& e : {Expect{"train", 60000, 9, 76247}, Expect{"test", 10000, 9, 33456}}) {
    kiln::ParamMap p = mnist_params(kDebianDir);
    p.set("split", std::string(e.split), "test");
    SourcePtr source = make_source(p);
    const kiln::DatasetInfo info = source->describe();
    BOOST_CHECK_EQUAL(info.count, e.count);
    BOOST_CHECK_EQUAL(info.description, std::string("Fashion-MNIST ") + e.split + ": " +
                                            std::to_string(e.count) + " samples from " + kDebianDir);
    std::vector<std::int64_t> per_class(10, 0);
    for (std::int64_t i = 0; i < info.count; ++i) {
      std::int32_t label = -1;
      const std::vector<float> x = read_sample(*source, i, label);
      BOOST_REQUIRE(label >= 0 && label < 10);
      ++per_class[static_cast<std::size_t>(label)];
      if (i == 0) {
        BOOST_CHECK_EQUAL(label, e.first_label);
        double sum = 0;
        for (float v : x) sum += v;
        BOOST_CHECK_CLOSE(sum * 255.0, static_cast<double>(e.first_sum), 1e-3);
      }
    }
    for (std::int64_t n : per_class) BOOST_CHECK_EQUAL(n, e.count / 10);  // balanced classes
  }
}
