// SyntheticSource: the `synthetic` data plugin, seeded random images and labels (the standard
// way to benchmark training without a data set).
//
// Decisions: sample i is a pure function of (seed, i), never of the loader's per-epoch seed, so
// every epoch sees the same data and a label is learnable; values are "normal-ish" (Irwin-Hall
// sum of the four 16-bit fields of one 64-bit hash per value, scaled to mean 0 and variance 1),
// so a read is one counter-based hash per value, in any order, and allocates nothing.
// With output = "u8" a sample is raw bytes (H, W, C) u8 (the image `shape` = [C, H, W] stored
// channels-last, as a decoder writes it), uniform in 0..255, eight bytes per hash.
#pragma once

#include <cstdint>

#include "kiln/data_source.hpp"
#include "kiln/plugin_args.hpp"

namespace kiln::synthetic {

/// What a sample is: normalised-like f32 in `shape`, or raw u8 bytes stored channels-last.
enum class Output : std::uint8_t { f32, u8 };

class SyntheticSource final : public DataSource {
 public:
  /// Reads parameters shape, classes, count, seed, output. Throws ConfigError for out-of-range values.
  explicit SyntheticSource(const PluginArgs& args);

  std::string_view name() const override { return "synthetic"; }
  DatasetInfo describe() const override { return info_; }
  /// Ignores `loader_seed`: the sample depends on (seed, index) only.
  void read(std::int64_t index, std::uint64_t loader_seed, const SampleSlot& out) const override;

  /// The label of sample `index` (what read() writes).
  std::int32_t label_of(std::int64_t index) const noexcept;

 private:
  /// The u8 sample `index`: numel_ bytes, eight per hash.
  void write_bytes(std::int64_t index, std::uint8_t* dst) const noexcept;

  DatasetInfo info_;
  Output output_ = Output::f32;
  std::uint64_t seed_ = 0;
  std::int64_t numel_ = 0;
};

}  // namespace kiln::synthetic
