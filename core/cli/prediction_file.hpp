// The file `kiln predict` writes: one row per sample with its index, its id where the source
// names its samples (an image's path: CSV column id, JSON "id"), its label where the data has
// labels, and its top-k classes and probabilities, as CSV (FILE.csv) or JSON lines (FILE.jsonl),
// chosen by the extension.
// Where the run knows its class names, each class index is followed by its name (CSV columns
// label_name and topK_name, quoted as RFC 4180 says; JSON "label_name" and "names"); a class past
// the end of the names gets an empty field (CSV) or null (JSON).
//
// Rows go to "<FILE>.partial-<pid>" in the same folder, renamed to FILE by commit(): a predict
// that fails half way leaves neither a half file nor a clobbered old one (the temporary is
// removed when the object is destroyed uncommitted). Throws ConfigError for another extension,
// IoError when the file cannot be written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cli {

class PredictionFile {
 public:
  /// Which optional columns the rows carry.
  struct Columns {
    bool ids = false;     ///< the source's sample ids (DataSource::sample_id)
    bool labels = true;   ///< label (and label_name); false for unlabeled data
  };
  /// Throws the constructor's ConfigError for a name it would refuse, creating nothing (so a
  /// command can refuse it before the slow part).
  static void check_name(const std::filesystem::path& path);
  /// Creates the temporary and writes the CSV header for `top_k` (>= 1) classes; `class_names`
  /// (possibly empty: no name columns) must outlive the object.
  PredictionFile(const std::filesystem::path& path, std::int64_t top_k, const std::vector<std::string>& class_names,
                 Columns columns);
  ~PredictionFile();
  PredictionFile(const PredictionFile&) = delete;
  PredictionFile& operator=(const PredictionFile&) = delete;

  /// One sample: `classes` and `probs` hold its top-k, most probable first; `id` and `label`
  /// are written where the columns say.
  void write(std::int64_t index, std::string_view id, std::int32_t label, std::span<const std::int64_t> classes,
             std::span<const double> probs);
  /// Flushes, closes and renames the temporary to the final name.
  void commit();

 private:
  enum class Format { csv, jsonl };
  static Format format_of(const std::filesystem::path& path);
  /// The name of class `c` as a CSV field or a JSON value.
  std::string csv_name(std::int64_t c) const;
  /// `text` as one CSV field: quoted as RFC 4180 says where it holds a comma, quote or line break.
  static std::string csv_field(std::string_view text);
  std::string json_name(std::int64_t c) const;
  std::filesystem::path path_, temp_;
  Format format_;
  const std::vector<std::string>& names_;
  Columns columns_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace kiln::cli
