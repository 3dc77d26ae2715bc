// Tests of the `imagenet` plugin's output = "u8": (size, size, 3) u8 samples that are exactly
// the f32 path's pixels before its mean/std step (same index and seed, train and eval
// transforms, both layouts' code path through the folder tree), the parameter's error for a bad
// value and the slot-size error naming the u8 shape. Data is generated here (fixtures.hpp).
#define KILN_TEST_MODULE test_imagenet_u8
#include "kiln_test_main.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "kiln/errors.hpp"

namespace fs = std::filesystem;
using namespace kiln_test;

namespace {

// A small ImageFolder tree: two classes, a gradient (crops differ) and a solid colour.
struct Tree {
  fs::path root;
  Tree() {
    root = fs::temp_directory_path() / fmt::format("kiln-imagenet-u8-test-{}", ::getpid());
    fs::remove_all(root);
    write_file(root / "train" / "n001" / "a_gradient.JPEG", gradient_jpeg(320, 240));
    write_file(root / "train" / "n002" / "b_solid.JPEG", solid_jpeg(64, 48, Rgb{220, 30, 40}));
    write_file(root / "val" / "n001" / "a_gradient.JPEG", gradient_jpeg(300, 200));
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

const Tree& tree() {
  static Tree t;
  return t;
}

std::string table(const std::string& extra) {
  return fmt::format("root = \"{}\"\n{}", tree().root.string(), extra);
}

std::vector<std::uint8_t> read_bytes(const kiln::DataSource& source, std::int64_t index, std::uint64_t seed,
                                     std::int32_t& label) {
  const auto info = source.describe();
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(kiln::shape_numel(info.sample_shape)));
  source.read(index, seed, kiln::SampleSlot{bytes.data(), bytes.size(), &label});
  return bytes;
}

// Every f32 value equals the normalised u8 byte at the same (c, y, x) within the byte rounding
// (half a grey level after normalisation) plus f32 noise.
void check_same_pixels(const std::string& extra, std::int64_t index, std::uint64_t seed) {
  auto f32 = make_source(table(extra));
  auto u8 = make_source(table(extra + "output = \"u8\"\n"));
  std::int32_t lf = -1, lu = -2;
  const std::vector<float> want = read_sample(*f32, index, seed, lf);
  const std::vector<std::uint8_t> got = read_bytes(*u8, index, seed, lu);
  BOOST_TEST(lf == lu);
  const int size = static_cast<int>(u8->describe().sample_shape[0]);
  BOOST_TEST_REQUIRE(got.size() == want.size());
  const float tolerance = 0.5f / 255.0f / 0.224f + 1e-5f;
  float worst = 0;
  int distinct = 0;
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < size; ++y) {
      for (int x = 0; x < size; ++x) {
        const std::uint8_t byte = got[(static_cast<std::size_t>(y) * size + x) * 3 + c];
        const float f = want[(static_cast<std::size_t>(c) * size + y) * size + x];
        worst = std::max(worst, std::abs(f - normalised(byte, c)));
        distinct += byte != got[c] ? 1 : 0;
      }
    }
  }
  BOOST_TEST(worst <= tolerance, "index " << index << " seed " << seed << ": worst deviation " << worst);
  if (index == 0) BOOST_TEST(distinct > 0);  // the gradient is not flat: the comparison means something
}

}  // namespace

BOOST_AUTO_TEST_CASE(u8_output_describes_hwc_bytes) {
  auto source = make_source(table("size = 40\noutput = \"u8\"\n"));
  const auto info = source->describe();
  BOOST_TEST((info.sample_shape == kiln::Shape{40, 40, 3}));
  BOOST_TEST((info.sample_dtype == kiln::DType::u8));
  BOOST_TEST(info.count == 2);
  BOOST_TEST(contains(info.description, "40x40 u8"), info.description);
  auto f32 = make_source(table("size = 40\n"));
  BOOST_TEST((f32->describe().sample_shape == kiln::Shape{3, 40, 40}));
  BOOST_TEST((f32->describe().sample_dtype == kiln::DType::f32));
  BOOST_TEST(contains(f32->describe().description, "40x40 f32"), f32->describe().description);
}

BOOST_AUTO_TEST_CASE(u8_bytes_are_the_f32_pixels_before_normalisation) {
  for (std::uint64_t seed = 0; seed < 6; ++seed) {  // several crops, both flip outcomes
    check_same_pixels("size = 48\n", 0, seed);
    check_same_pixels("size = 48\n", 1, seed);
  }
  check_same_pixels("size = 32\nsplit = \"val\"\nresize = 40\n", 0, 3);  // eval transform
}

BOOST_AUTO_TEST_CASE(u8_solid_colour_survives_as_bytes) {
  auto source = make_source(table("size = 16\noutput = \"u8\"\n"));
  std::int32_t label = -1;
  const auto px = read_bytes(*source, 1, 9, label);
  BOOST_TEST(label == 1);
  int worst = 0;
  const int colour[3] = {220, 30, 40};
  for (std::size_t i = 0; i < px.size(); ++i) worst = std::max(worst, std::abs(px[i] - colour[i % 3]));
  BOOST_TEST(worst <= 6, "worst byte deviation " << worst);  // JPEG tolerance
}

BOOST_AUTO_TEST_CASE(u8_slot_size_and_bad_output_value) {
  auto source = make_source(table("size = 16\noutput = \"u8\"\n"));
  std::vector<float> f(3 * 16 * 16);
  std::int32_t label = -1;
  const std::string e = error_of([&] { source->read(0, 0, kiln::SampleSlot{f.data(), f.size() * 4, &label}); });
  BOOST_TEST(contains(e, "imagenet: sample 0 asked into a slot of 3072 bytes; it needs 768 bytes ((16, 16, 3) u8)"),
             e);
  const std::string bad = error_of([&] { make_source(table("output = \"f16\"\n")); });
  BOOST_TEST(contains(bad, "output"), bad);
  BOOST_TEST(contains(bad, "f16"), bad);
}
