// metrics.jsonl: one JSON object per line, appended and flushed as each record is complete, so
// the file is always valid up to its last line even if the run dies. Values are numbers or
// strings; keys keep their insertion order.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::io {

/// One record under construction.
class MetricsRecord {
 public:
  MetricsRecord& add(std::string key, double value);
  MetricsRecord& add(std::string key, std::int64_t value);
  MetricsRecord& add(std::string key, std::string value);
  /// The record as one line of JSON (no newline).
  std::string to_json() const;

 private:
  std::vector<std::pair<std::string, std::variant<double, std::int64_t, std::string>>> fields_;
};

class MetricsWriter {
 public:
  /// Opens `path` for appending. Throws IoError.
  explicit MetricsWriter(const std::filesystem::path& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  /// Appends one line and flushes. Throws IoError (disk full) naming the file.
  void write(const MetricsRecord& record);
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace kiln::io
