// MnistSource: the `mnist` data plugin, reading MNIST and Fashion-MNIST IDX files (raw or .gz).
//
// Decisions: both files of a split are loaded, checked and kept in memory at construction
// (47 MB for the training images), so read() is a table lookup per pixel with no I/O and no
// locks; normalisation (pixel/255 - mean) / std goes through a 256-entry table built once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/data_source.hpp"
#include "kiln/plugin_args.hpp"

namespace kiln::mnist {

inline constexpr std::int64_t kImageSide = 28;
inline constexpr std::int64_t kImagePixels = kImageSide * kImageSide;

class MnistSource final : public DataSource {
 public:
  /// Reads parameters path, split, mean, std, flatten, limit, num_classes (see README.md).
  /// Throws ConfigError for a bad parameter value, DataError for missing or corrupt files.
  explicit MnistSource(const PluginArgs& args);

  std::string_view name() const override { return "mnist"; }
  DatasetInfo describe() const override { return info_; }
  void read(std::int64_t index, std::uint64_t seed, const SampleSlot& out) const override;

  /// The files actually read (for messages and tests).
  const std::string& images_file() const noexcept { return images_file_; }
  const std::string& labels_file() const noexcept { return labels_file_; }

 private:
  DatasetInfo info_;
  std::string split_;
  std::string images_file_;
  std::string labels_file_;
  std::vector<std::uint8_t> pixels_;   // (count, 28, 28) u8
  std::vector<std::int32_t> labels_;   // (count)
  std::array<float, 256> normalised_{};  // pixel value -> (v / 255 - mean) / std
};

}  // namespace kiln::mnist
