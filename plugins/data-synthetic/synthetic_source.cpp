// SyntheticSource: parameter checks and the allocation-free sample generator.
#include "synthetic_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/rng.hpp"

namespace kiln::synthetic {
namespace {

// Stream tags so pixel values and labels never share a hash input.
constexpr std::uint64_t kPixelStream = 0x5049584Cull;  // "PIXL"
constexpr std::uint64_t kLabelStream = 0x4C41424Cull;  // "LABL"
constexpr std::uint64_t kByteStream = 0x42595445ull;   // "BYTE"

// Irwin-Hall(4) of 16-bit uniforms: the sum has mean 4 * 32767.5 and standard deviation
// ~2^16 / sqrt(3); centred and scaled to mean 0, variance 1.
constexpr std::int64_t kSumMean = 131070;
constexpr float kScale = 1.7320508f / 65536.0f;

}  // namespace

SyntheticSource::SyntheticSource(const PluginArgs& args) {
  if (!args.params) throw ConfigError("synthetic: created without a parameter table");
  const ParamMap& p = *args.params;
  const auto& shape = p.get<std::vector<std::int64_t>>("shape");
  const std::int64_t classes = p.get_int("classes");
  const std::int64_t count = p.get_int("count");
  const std::int64_t seed = p.get_int("seed");
  const std::string& output = p.get_string("output");
  if (output == "f32") {
    output_ = Output::f32;
  } else if (output == "u8") {
    output_ = Output::u8;
  } else {
    throw ConfigError(fmt::format("{} = \"{}\" is not a sample type; use \"f32\" (normalised-like values in "
                                  "`shape`) or \"u8\" (raw bytes, (H, W, C) for shape [C, H, W])",
                                  p.where("output"), output));
  }
  if (shape.empty()) throw ConfigError(p.where("shape") + " is empty; give the sample shape, e.g. [3, 224, 224]");
  // Each dimension >= 1, classes in 1..2^31-1, count >= 1, seed >= 0: the schema's ranges.
  if (output_ == Output::u8 && shape.size() != 3) {
    throw ConfigError(fmt::format("{} has {} dimensions but {} = \"u8\" makes images: give [C, H, W], "
                                  "e.g. [3, 224, 224] (samples are then (H, W, C) u8)",
                                  p.where("shape"), shape.size(), p.where("output")));
  }
  seed_ = static_cast<std::uint64_t>(seed);
  info_.sample_shape = output_ == Output::u8 ? Shape{shape[1], shape[2], shape[0]} : Shape(shape.begin(), shape.end());
  info_.sample_dtype = output_ == Output::u8 ? DType::u8 : DType::f32;
  info_.num_classes = classes;
  info_.count = count;
  // Passed on unchecked: the core's own check of the contract is what a test of it needs to reach.
  info_.class_names = p.get<std::vector<std::string>>("class_names");
  numel_ = shape_numel(info_.sample_shape);
  info_.description = fmt::format("synthetic {} samples of {} {}, {} classes, seed {}", count,
                                  shape_string(info_.sample_shape), dtype_name(info_.sample_dtype), classes, seed);
}

std::int32_t SyntheticSource::label_of(std::int64_t index) const noexcept {
  const std::uint64_t h = derive_seed(seed_, kLabelStream, static_cast<std::uint64_t>(index));
  return static_cast<std::int32_t>(h % static_cast<std::uint64_t>(info_.num_classes));
}

void SyntheticSource::read(std::int64_t index, std::uint64_t /*loader_seed*/, const SampleSlot& out) const {
  if (index < 0 || index >= info_.count) {
    throw DataError(fmt::format("synthetic: sample index {} is outside [0, {}) (data count)", index, info_.count));
  }
  const std::size_t want = static_cast<std::size_t>(numel_) * dtype_size(info_.sample_dtype);
  if (out.data == nullptr || out.bytes != want || out.label == nullptr) {
    throw DataError(fmt::format("synthetic: sample {} needs a {}-byte buffer and a label slot, got {} bytes",
                                index, want, out.bytes));
  }
  *out.label = label_of(index);
  if (output_ == Output::u8) {
    write_bytes(index, static_cast<std::uint8_t*>(out.data));
    return;
  }
  float* dst = static_cast<float*>(out.data);
  const std::uint64_t base = derive_seed(seed_, kPixelStream, static_cast<std::uint64_t>(index));
  for (std::int64_t i = 0; i < numel_; ++i) {
    const std::uint64_t h = mix64(base + static_cast<std::uint64_t>(i));
    const std::int64_t sum = static_cast<std::int64_t>(h & 0xFFFF) + static_cast<std::int64_t>((h >> 16) & 0xFFFF) +
                             static_cast<std::int64_t>((h >> 32) & 0xFFFF) + static_cast<std::int64_t>(h >> 48);
    dst[i] = static_cast<float>(sum - kSumMean) * kScale;
  }
}

void SyntheticSource::write_bytes(std::int64_t index, std::uint8_t* dst) const noexcept {
  const std::uint64_t base = derive_seed(seed_, kByteStream, static_cast<std::uint64_t>(index));
  for (std::int64_t i = 0; i < numel_; i += 8) {
    std::uint64_t h = mix64(base + static_cast<std::uint64_t>(i / 8));
    const std::int64_t end = std::min<std::int64_t>(numel_, i + 8);
    for (std::int64_t j = i; j < end; ++j, h >>= 8) dst[j] = static_cast<std::uint8_t>(h & 0xFF);
  }
}

}  // namespace kiln::synthetic
