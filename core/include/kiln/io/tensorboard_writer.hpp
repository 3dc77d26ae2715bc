// TensorBoard event files, written without TensorFlow or protobuf.
//
// File: <dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>. Each record is TFRecord
// framing (u64 length, masked CRC-32C of the length, the bytes, masked CRC-32C of the bytes,
// little-endian); each payload a serialized tensorflow.Event: the first carries file_version
// "brain.Event:2", the rest a Summary with one scalar (tag, simple_value) or one histogram (tag,
// histo: histogram.hpp) at a step. The ~40 lines of protobuf encoding are in the .cpp (field
// numbers from event.proto/summary.proto). Flushed after every add_scalars() and
// add_histograms() call: records are written once per epoch, or every [log] every_steps steps,
// so the cost is small and a crash loses nothing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "kiln/io/histogram.hpp"

namespace kiln::io {

class TensorBoardWriter {
 public:
  /// Creates `dir` and the event file. Throws IoError.
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  /// Writes one scalar event per (tag, value) at `step`, then flushes. Throws IoError. Values
  /// are stored as float (simple_value): NaN and infinities stay what they are, and a finite
  /// double beyond float's range becomes an infinity. `wall_time` (Unix seconds) is the events'
  /// time; without it, now.
  void add_scalars(const std::vector<std::pair<std::string, double>>& scalars, std::int64_t step);
  void add_scalars(const std::vector<std::pair<std::string, double>>& scalars, std::int64_t step, double wall_time);
  /// Writes one histogram event per (tag, histogram) at `step` (histogram.hpp), then flushes.
  /// Throws IoError.
  void add_histograms(const std::vector<std::pair<std::string, Histogram>>& histograms, std::int64_t step,
                      double wall_time);
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  void write_record(const std::string& payload);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace kiln::io
