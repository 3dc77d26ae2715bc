// metrics.jsonl: one JSON object per line, appended and flushed as each record is complete, so
// the file is always valid up to its last line even if the run dies. Values are numbers or
// strings; keys keep their insertion order. Every record starts with "wall_time", the Unix time
// in seconds (a float, microsecond resolution) when it was written. A number that is not finite
// (a diverged loss) is written as null, since JSON has no NaN or Infinity. The same numbers go to
// TensorBoard: every numeric field but "epoch", "step" and "wall_time" becomes a scalar at the
// record's "step" with the record's wall_time (metric_tags.hpp names the tag), in an event file
// under tb/ next to metrics.jsonl; there a non-finite value stays the IEEE NaN or infinity, which
// TensorBoard draws as a triangle. docs/metrics.md describes every field.
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/io/tensorboard_writer.hpp"

namespace kiln::io {

/// One record under construction.
class MetricsRecord {
 public:
  MetricsRecord& add(std::string key, double value);
  MetricsRecord& add(std::string key, std::int64_t value);
  MetricsRecord& add(std::string key, std::string value);
  using Field = std::pair<std::string, std::variant<double, std::int64_t, std::string>>;
  MetricsRecord& add_field(std::string key, Field::second_type value);
  /// The record as one line of JSON (no newline).
  std::string to_json() const;
  const std::vector<Field>& fields() const noexcept { return fields_; }

 private:
  std::vector<Field> fields_;
};

class MetricsWriter {
 public:
  /// Opens `path` for appending and starts an event file in <dir of path>/tb. Throws IoError.
  /// `wall_clock` gives the Unix time in seconds (default: the system clock; tests inject one).
  explicit MetricsWriter(const std::filesystem::path& path, std::function<double()> wall_clock = {});
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  /// Appends one line, with "wall_time" first unless the record has one, and flushes. Throws
  /// IoError (disk full) naming the file.
  void write(const MetricsRecord& record);
  /// Writes histograms (histogram.hpp) into the TensorBoard event file only: metrics.jsonl keeps
  /// scalars. Throws IoError.
  void write_histograms(const std::vector<std::pair<std::string, Histogram>>& histograms, std::int64_t step);
  const std::filesystem::path& path() const noexcept { return path_; }
  /// For a resumed run: drops the records written after the checkpoint at `epochs_done` epochs
  /// and `steps_done` optimizer steps (metrics_trim.hpp) and appends after what is left.
  /// TensorBoard's event files are not rewritten: the earlier run's events stay in their own
  /// file, and TensorBoard shows both runs' points for those steps. Returns how many lines were
  /// dropped. Throws IoError.
  std::int64_t drop_records_after(std::int64_t epochs_done, std::int64_t steps_done);

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::function<double()> wall_clock_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace kiln::io
