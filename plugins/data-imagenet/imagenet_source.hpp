// ImagenetSource: the `imagenet` data plugin, reading ImageNet as an ImageFolder tree or as
// TFRecord shards, or unlabeled images under a directory (layout = "files", for kiln predict),
// and producing f32 (3, size, size) normalised CHW samples, or with output = "u8" the
// (size, size, 3) bytes before normalisation (the model's backend normalises).
//
// Decisions: the file list / record offsets are built once in the constructor; read() keeps no
// shared mutable state except the skipped-sample counter (atomic), so any number of loader
// threads may call it. All randomness comes from SampleRng(seed). With on_error = "skip" a bad
// sample is replaced by the next good index (same seed) and counted; the count goes to the log
// ("imagenet" logger), because metrics.jsonl belongs to the trainer and DataSource has no
// channel for it.
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "file_list.hpp"
#include "folder_index.hpp"
#include "kiln/data_source.hpp"
#include "kiln/plugin_args.hpp"
#include "tfrecord_index.hpp"
#include "transform.hpp"

namespace kiln::imagenet {

enum class Layout { folder, tfrecord, files };
enum class OnError { fail, skip };

class ImagenetSource final : public DataSource {
 public:
  /// Reads the parameters of plugin.cpp's schema. Throws ConfigError for a bad value, DataError
  /// for a missing or corrupt dataset.
  explicit ImagenetSource(const PluginArgs& args);

  std::string_view name() const override { return "imagenet"; }
  DatasetInfo describe() const override { return info_; }
  void read(std::int64_t index, std::uint64_t seed, const SampleSlot& out) const override;
  /// The image's path under root ("val/n01440764/x.JPEG", with layout = "files" "cats/01.jpg"),
  /// or "<shard file>:<record>" for TFRecord.
  std::string sample_id(std::int64_t index) const override;

  /// Samples replaced so far under on_error = "skip".
  std::int64_t skipped() const noexcept { return skipped_.load(); }
  /// {"skipped_samples": n}: the trainer writes it into metrics.jsonl as data_skipped_samples.
  std::map<std::string, double> counters() const override {
    return {{"skipped_samples", static_cast<double>(skipped_.load())}};
  }

 private:
  /// Reads one sample; throws DataError for a bad one.
  void read_one(std::int64_t index, std::uint64_t seed, void* pixels, std::int32_t* label) const;

  Layout layout_ = Layout::folder;
  OnError on_error_ = OnError::fail;
  TransformOptions transform_;
  std::int64_t max_pixels_ = 0;
  bool decode_scaled_ = true;  // DCT-domain downscaling allowed (see jpeg_decoder.hpp)
  std::uint64_t max_record_bytes_ = 0;
  std::int64_t label_offset_ = -1;
  std::unique_ptr<FolderIndex> folder_;
  std::unique_ptr<TfRecordIndex> records_;
  std::unique_ptr<FileList> files_;
  std::string split_;
  DatasetInfo info_;
  mutable std::atomic<std::int64_t> skipped_{0};
};

}  // namespace kiln::imagenet
