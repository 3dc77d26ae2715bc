// The `csv` data source: one sample per line of a CSV file, a class label in one column and the
// features in all others, e.g. a row of Fashion-MNIST as "label,p0,p1,...,p783".
//
// A data plugin only describes its samples and reads one of them into a buffer it is given; the
// core's DataLoader does sharding across ranks, shuffling, batching, worker threads and
// prefetching. This one parses the whole file once, in the constructor, so that a malformed line
// fails at start-up with its file:line:column -- before the run directory exists -- and read()
// is a copy that cannot fail. read() is called from several loader threads at once: it only
// reads the parsed rows, which never change after construction.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <kiln/sdk/file_error.hpp>
#include <kiln/sdk/log.hpp>
#include <kiln/sdk/plugin.hpp>

namespace csv_sample {

// "path:line:col: what" -- the place a user's editor can jump to (kiln::sdk::file_error).
kiln::DataError error_at(const std::string& path, std::size_t line, std::size_t column, const std::string& what) {
  return kiln::sdk::file_error(path, static_cast<std::int64_t>(line), static_cast<std::int64_t>(column), what);
}

class CsvSource final : public kiln::DataSource {
 public:
  explicit CsvSource(const kiln::PluginArgs& args) {
    const kiln::ParamMap& p = *args.params;
    path_ = p.get_string("path");
    file_name_ = path_.substr(path_.find_last_of('/') + 1);
    const bool header = p.get_bool("header");
    const std::int64_t label_column = p.get_int("label_column");
    const double scale = p.get_float("scale");
    const std::int64_t limit = p.get_int("limit");
    classes_ = p.get_int("num_classes");
    if (label_column < 0) throw kiln::ConfigError(p.where("label_column") + " must be >= 0");
    if (!std::isfinite(scale)) throw kiln::ConfigError(p.where("scale") + " must be a finite number");
    if (limit < 0) throw kiln::ConfigError(p.where("limit") + " must be >= 0 (0 reads every row)");
    if (classes_ < 2) throw kiln::ConfigError(p.where("num_classes") + " must be at least 2");
    // Optional, but worth giving: runs keep the names in checkpoints and `kiln predict` prints them.
    class_names_ = p.get<std::vector<std::string>>("class_names");
    if (!class_names_.empty() && static_cast<std::int64_t>(class_names_.size()) != classes_) {
      throw kiln::ConfigError(fmt::format("{} has {} names; give one per class ({})", p.where("class_names"),
                                          class_names_.size(), p.where("num_classes")));
    }

    std::ifstream in(path_, std::ios::binary);
    if (!in) throw kiln::DataError(fmt::format("{}: cannot open ({}); set {}", path_, std::strerror(errno), p.where("path")));
    std::string line;
    std::size_t line_no = 0;
    std::vector<float> row;
    while (std::getline(in, line) && (limit == 0 || static_cast<std::int64_t>(labels_.size()) < limit)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();  // files written on Windows
      if ((header && line_no == 1) || line.empty()) continue;
      parse_row(line, line_no, static_cast<std::size_t>(label_column), static_cast<float>(scale), row);
      if (features_ == 0) features_ = static_cast<std::int64_t>(row.size());
      if (static_cast<std::int64_t>(row.size()) != features_) {
        throw error_at(path_, line_no, 1, fmt::format("{} feature columns, but the first row has {}", row.size(), features_));
      }
      values_.insert(values_.end(), row.begin(), row.end());
      lines_.push_back(line_no);
    }
    if (in.bad()) throw kiln::DataError(fmt::format("{}: read error after line {}", path_, line_no));
    if (labels_.empty()) throw kiln::DataError(fmt::format("{}: no data rows", path_));
    kiln::log::get("csv")->info("{}: {} rows of {} features", path_, labels_.size(), features_);
  }

  std::string_view name() const override { return "csv"; }

  kiln::DatasetInfo describe() const override {
    kiln::DatasetInfo info;
    info.sample_shape = {features_};
    info.sample_dtype = kiln::DType::f32;
    info.num_classes = classes_;
    info.class_names = class_names_;
    info.count = static_cast<std::int64_t>(labels_.size());
    info.description = fmt::format("CSV {} ({} rows)", path_, labels_.size());
    return info;
  }

  void read(std::int64_t index, std::uint64_t /*seed: no augmentation*/, const kiln::SampleSlot& out) const override {
    const std::size_t bytes = static_cast<std::size_t>(features_) * sizeof(float);
    if (index < 0 || index >= static_cast<std::int64_t>(labels_.size()) || out.bytes != bytes) {
      throw kiln::DataError(fmt::format("{}: read({}) into {} bytes; rows are 0..{} of {} bytes", path_, index,
                                        out.bytes, labels_.size() - 1, bytes));
    }
    std::memcpy(out.data, values_.data() + index * features_, bytes);
    *out.label = labels_[static_cast<std::size_t>(index)];
  }

  // Optional: what a user calls a sample. `kiln predict` writes it in its id column, so the rows
  // a model gets wrong can be found in the file: "test.csv:2" is its second line.
  std::string sample_id(std::int64_t index) const override {
    if (index < 0 || index >= static_cast<std::int64_t>(lines_.size())) {
      throw kiln::DataError(fmt::format("{}: sample_id({}); rows are 0..{}", path_, index, lines_.size() - 1));
    }
    return fmt::format("{}:{}", file_name_, lines_[static_cast<std::size_t>(index)]);
  }

 private:
  // Splits one line on commas; the label column becomes a label, every other column a feature.
  void parse_row(std::string_view line, std::size_t line_no, std::size_t label_column, float scale,
                 std::vector<float>& row) {
    row.clear();
    bool have_label = false;
    std::size_t start = 0;
    for (std::size_t column = 0; start <= line.size(); ++column) {
      std::size_t end = line.find(',', start);
      if (end == std::string_view::npos) end = line.size();
      std::string_view cell = line.substr(start, end - start);
      while (!cell.empty() && cell.front() == ' ') cell.remove_prefix(1);
      while (!cell.empty() && cell.back() == ' ') cell.remove_suffix(1);
      double value = 0;
      const auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
      if (cell.empty() || ec != std::errc() || ptr != cell.data() + cell.size() || !std::isfinite(value)) {
        throw error_at(path_, line_no, start + 1, fmt::format("'{}' is not a finite number", cell));
      }
      if (column == label_column) {
        if (value != std::floor(value) || value < 0 || value >= static_cast<double>(classes_)) {
          throw error_at(path_, line_no, start + 1,
                         fmt::format("label {} is not a class index in 0..{} (num_classes = {})", cell, classes_ - 1, classes_));
        }
        labels_.push_back(static_cast<std::int32_t>(value));
        have_label = true;
      } else {
        row.push_back(static_cast<float>(value) * scale);
      }
      start = end + 1;
    }
    if (!have_label) {
      throw error_at(path_, line_no, line.size() + 1, fmt::format("no column {} for the label", label_column));
    }
  }

  std::string path_;
  std::int64_t classes_ = 0;
  std::vector<std::string> class_names_;
  std::int64_t features_ = 0;
  std::vector<float> values_;  // row-major, features_ per row
  std::vector<std::int32_t> labels_;
  std::string file_name_;          // path_'s last component, for sample ids
  std::vector<std::size_t> lines_;  // the line each row came from (1-based)
};

constexpr kiln_param_spec_v1 kCsvParams[] = {
    // A path parameter: the host makes a relative value absolute against the config file's folder.
    {"path", KILN_PARAM_PATH, nullptr, nullptr, "The CSV file: one sample per line."},
    {"header", KILN_PARAM_BOOL, "false", nullptr, "Skip the first line (column names)."},
    {"label_column", KILN_PARAM_INT, "0", nullptr, "Zero-based column holding the class index."},
    {"num_classes", KILN_PARAM_INT, "10", nullptr, "Number of classes; labels must be in 0..num_classes-1."},
    {"class_names", KILN_PARAM_STRING_LIST, "[]", nullptr, "What labels 0, 1, ... are called: one per class, or []."},
    {"scale", KILN_PARAM_FLOAT, "1.0", nullptr, "Every feature is multiplied by this (1/255 for pixel bytes)."},
    {"limit", KILN_PARAM_INT, "0", nullptr, "Read at most this many rows (0: all)."},
};

}  // namespace csv_sample

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::DataSource, csv_sample::CsvSource>(
    "csv", "0.1.0", "Samples from a CSV file: a label column and numeric features", csv_sample::kCsvParams));
