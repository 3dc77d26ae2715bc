// Fuzz targets: each parser Kiln runs on bytes it did not write itself (checkpoints, configs, data
// files, the rendezvous store's frames), wrapped as a function of one input.
//
// The contract a target checks is the project's rule for hostile input: every input either parses
// or fails with a kiln::Error whose message names where the bad bytes came from. Anything else is
// a finding: a crash or sanitizer report, an exception of another type (std::length_error from a
// forged size, std::bad_alloc from a forged count), or an error message without its source.
// finding() aborts with the reason, so libFuzzer and the replay driver both stop on it.
//
// The same targets build two ways (tests/fuzz/CMakeLists.txt): into kiln_fuzz_replay, which CTest
// runs over generated seeds and deterministic mutations of them with any compiler, and, with
// clang and -DKILN_FUZZ=ON, into one libFuzzer executable per target (scripts/fuzz.sh).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {
class Error;
}

namespace kiln::fuzz {

using Input = std::span<const std::uint8_t>;
using Bytes = std::vector<std::uint8_t>;

struct Target {
  std::string_view name;
  /// What the target feeds its input to, for `kiln_fuzz_replay --list`.
  std::string_view parses;
  /// Runs one input: true if it was accepted, false if it failed with a well-named kiln::Error.
  /// Returns only then: any other outcome is a finding (it aborts, see finding()).
  bool (*run)(Input input);
  /// Valid inputs made by Kiln's own writers, so the seeds follow the formats as they change.
  std::vector<Bytes> (*seeds)();
};

/// Every target built into this executable, in a fixed order.
std::span<const Target> all_targets();

/// Prints "kiln-fuzz: finding: <what>" to stderr and aborts.
[[noreturn]] void finding(const std::string& what);

/// A kiln::Error was thrown for bad input: that is the expected outcome, provided its message
/// names `source` (the file, table or peer the input came from). Otherwise finding().
void expect_named(const kiln::Error& error, std::string_view source);

/// Names a parser accepted must be ones a data source may give (kiln::train::check_class_names,
/// with exactly `classes` classes): otherwise finding(), naming `parser`.
void expect_valid_class_names(const std::vector<std::string>& names, std::int64_t classes, std::string_view parser);

/// With it on, expect_named() prints every message it accepts (kiln_fuzz_replay --verbose).
void set_verbose(bool on);

/// A fresh scratch directory for this process (created on first use, removed at exit): targets
/// whose parser reads files write their input there.
const std::string& scratch_dir();

/// Writes `bytes` to `path` (finding() if that fails: the harness, not the input, is broken).
void write_bytes(const std::string& path, Input bytes);
/// The whole file at `path` (empty if it cannot be read).
Bytes read_bytes(const std::string& path);

/// The bytes of `text` (seeds written as text: configs, JSON, environment lines).
Bytes bytes_of(std::string_view text);

/// A safetensors file as PyTorch writes it: `header` (JSON) padded to 8 bytes, then `data_bytes`
/// zero bytes; no Kiln checksums, so mutations of its metadata reach what reads the metadata.
Bytes plain_safetensors(std::string header, std::size_t data_bytes);

// The targets, one group per source file.
std::span<const Target> core_io_targets();     // targets_core_io.cpp
std::span<const Target> config_targets();      // targets_config.cpp
std::span<const Target> plugin_schema_targets();  // targets_plugin_schema.cpp
std::span<const Target> checkpoint_targets();  // targets_checkpoint.cpp
std::span<const Target> store_wire_targets();  // targets_store_wire.cpp
std::span<const Target> launch_targets();      // targets_launch.cpp
std::span<const Target> mnist_targets();       // targets_mnist.cpp
std::span<const Target> imagenet_targets();    // targets_imagenet.cpp (empty without libjpeg-turbo)

}  // namespace kiln::fuzz
