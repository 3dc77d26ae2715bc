// The harness pieces every target uses (see fuzz_target.hpp).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "fuzz_target.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/class_names.hpp"

namespace kiln::fuzz {

std::span<const Target> all_targets() {
  static const std::vector<Target> targets = [] {
    std::vector<Target> all;
    for (auto group : {core_io_targets(), checkpoint_targets(), config_targets(), plugin_schema_targets(),
                       store_wire_targets(), launch_targets(), mnist_targets()})
      all.insert(all.end(), group.begin(), group.end());
#ifdef KILN_FUZZ_HAVE_IMAGENET
    auto imagenet = imagenet_targets();
    all.insert(all.end(), imagenet.begin(), imagenet.end());
#endif
    return all;
  }();
  return targets;
}

void finding(const std::string& what) {
  std::fprintf(stderr, "kiln-fuzz: finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

namespace {
bool verbose = false;
}  // namespace

void set_verbose(bool on) { verbose = on; }

void expect_named(const kiln::Error& error, std::string_view source) {
  const std::string_view message = error.what();
  if (verbose) std::fprintf(stderr, "kiln-fuzz: rejected: %s\n", error.what());
  if (message.find(source) == std::string_view::npos)
    finding("the error does not name its source '" + std::string(source) + "': " + std::string(message));
}

void expect_valid_class_names(const std::vector<std::string>& names, std::int64_t classes, std::string_view parser) {
  DatasetInfo info;
  info.num_classes = classes;
  info.class_names = names;
  try {
    train::check_class_names(info, parser, "fuzz");
  } catch (const kiln::Error& e) {
    finding(std::string(parser) + " accepted class names a source may not give: " + e.what());
  }
  if (static_cast<std::int64_t>(names.size()) != classes) {
    finding(std::string(parser) + " accepted " + std::to_string(names.size()) + " names for " +
            std::to_string(classes) + " classes");
  }
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

Bytes bytes_of(std::string_view text) { return Bytes(text.begin(), text.end()); }

Bytes plain_safetensors(std::string header, std::size_t data_bytes) {
  header.resize((header.size() + 7) / 8 * 8, ' ');
  Bytes file(8 + header.size() + data_bytes, 0);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<std::uint8_t>(n >> (8 * i));
  std::copy(header.begin(), header.end(), file.begin() + 8);
  return file;
}

namespace {

/// Removes the scratch directory when the process exits normally (a crash leaves it for a look).
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) finding("cannot create a scratch directory under " + pattern);
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

void write_bytes(const std::string& path, Input bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) finding("cannot write the input to " + path);
}

}  // namespace kiln::fuzz
