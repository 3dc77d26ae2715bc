// Writing predictions (see prediction_file.hpp).
#include "prediction_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <string>
#include <system_error>

#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"

namespace kiln::cli {
namespace fs = std::filesystem;

PredictionFile::Format PredictionFile::format_of(const fs::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".csv") return Format::csv;
  if (ext == ".jsonl") return Format::jsonl;
  throw ConfigError(fmt::format("--output {}: the file name must end in .csv or .jsonl (that picks the format)",
                                path.string()));
}

void PredictionFile::check_name(const fs::path& path) {
  (void)format_of(path);
  // Else the whole pass would run before the rename onto it failed.
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw ConfigError(fmt::format("--output {}: is a directory; name a file in it (e.g. {})", path.string(),
                                  (path / ("predictions" + path.extension().string())).string()));
  }
}

PredictionFile::PredictionFile(const fs::path& path, std::int64_t top_k, const std::vector<std::string>& class_names,
                               Columns columns)
    : path_(path), format_(format_of(path)), names_(class_names), columns_(columns) {
  temp_ = path;
  temp_ += fmt::format(".partial-{}", ::getpid());
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw IoError(fmt::format("--output {}: cannot create {}", path.string(), temp_.string()));
  if (format_ == Format::csv) {
    out_ << "index";
    if (columns_.ids) out_ << ",id";
    if (columns_.labels) out_ << (names_.empty() ? ",label" : ",label,label_name");
    for (std::int64_t k = 1; k <= top_k; ++k) {
      out_ << fmt::format(",top{}", k);
      if (!names_.empty()) out_ << fmt::format(",top{}_name", k);
      out_ << fmt::format(",prob{}", k);
    }
    out_ << "\n";
  }
}

PredictionFile::~PredictionFile() {
  if (!committed_) {
    out_.close();
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

std::string PredictionFile::csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";  // RFC 4180: enclosed in quotes, a quote doubled ("tench, Tinca tinca")
  for (const char ch : text) {
    if (ch == '"') quoted += '"';
    quoted += ch;
  }
  return quoted + '"';
}

std::string PredictionFile::csv_name(std::int64_t c) const {
  if (c < 0 || c >= static_cast<std::int64_t>(names_.size())) return "";
  return csv_field(names_[static_cast<std::size_t>(c)]);
}

std::string PredictionFile::json_name(std::int64_t c) const {
  if (c < 0 || c >= static_cast<std::int64_t>(names_.size())) return "null";
  return io::json_quoted(names_[static_cast<std::size_t>(c)]);
}

void PredictionFile::write(std::int64_t index, std::string_view id, std::int32_t label,
                           std::span<const std::int64_t> classes, std::span<const double> probs) {
  // 17 significant digits: a double read back is the double written, so sums and comparisons
  // made from the file are exact.
  const bool named = !names_.empty();
  if (format_ == Format::csv) {
    out_ << index;
    if (columns_.ids) out_ << ',' << csv_field(id);
    if (columns_.labels) {
      out_ << ',' << label;
      if (named) out_ << ',' << csv_name(label);
    }
    for (std::size_t k = 0; k < classes.size(); ++k) {
      out_ << ',' << classes[k];
      if (named) out_ << ',' << csv_name(classes[k]);
      out_ << fmt::format(",{:.17g}", probs[k]);
    }
    out_ << '\n';
  } else {
    out_ << fmt::format("{{\"index\":{},", index);
    if (columns_.ids) out_ << "\"id\":" << io::json_quoted(id) << ',';
    if (columns_.labels) {
      out_ << fmt::format("\"label\":{},", label);
      if (named) out_ << "\"label_name\":" << json_name(label) << ',';
    }
    out_ << fmt::format("\"top\":[{}],", fmt::join(classes, ","));
    if (named) {
      out_ << "\"names\":[";
      for (std::size_t k = 0; k < classes.size(); ++k) out_ << (k ? "," : "") << json_name(classes[k]);
      out_ << "],";
    }
    out_ << "\"prob\":[";
    for (std::size_t k = 0; k < probs.size(); ++k) out_ << (k ? "," : "") << fmt::format("{:.17g}", probs[k]);
    out_ << "]}\n";
  }
}

void PredictionFile::commit() {
  out_.flush();
  out_.close();
  if (!out_) throw IoError(fmt::format("--output {}: writing {} failed", path_.string(), temp_.string()));
  std::error_code ec;
  fs::rename(temp_, path_, ec);
  if (ec) throw IoError(fmt::format("--output {}: cannot rename {} to it: {}", path_.string(), temp_.string(), ec.message()));
  committed_ = true;
}

}  // namespace kiln::cli
