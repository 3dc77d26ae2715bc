// metrics.jsonl: one JSON object per line, appended and flushed as each record is complete, so
// the file is always valid up to its last line even if the run dies. Values are numbers or
// strings; keys keep their insertion order. The same numbers go to TensorBoard: every numeric
// field but "epoch" and "step" becomes the scalar "<split>/<key>" at the record's "step", in an
// event file under tb/ next to metrics.jsonl.
#pragma once

#include <cstdio>
#include <filesystem>
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
  /// The record as one line of JSON (no newline).
  std::string to_json() const;
  using Field = std::pair<std::string, std::variant<double, std::int64_t, std::string>>;
  const std::vector<Field>& fields() const noexcept { return fields_; }

 private:
  std::vector<Field> fields_;
};

class MetricsWriter {
 public:
  /// Opens `path` for appending and starts an event file in <dir of path>/tb. Throws IoError.
  explicit MetricsWriter(const std::filesystem::path& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  /// Appends one line and flushes. Throws IoError (disk full) naming the file.
  void write(const MetricsRecord& record);
  const std::filesystem::path& path() const noexcept { return path_; }
  /// For a resumed run: drops the records of epochs after `epochs_done` (metrics_trim.hpp) and
  /// appends after what is left. TensorBoard's event files are not rewritten: the earlier run's
  /// events stay in their own file, and TensorBoard shows both runs' points for those steps.
  /// Returns how many lines were dropped. Throws IoError.
  std::int64_t drop_epochs_after(std::int64_t epochs_done);

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace kiln::io
