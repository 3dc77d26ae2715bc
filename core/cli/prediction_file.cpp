// Writing predictions (see prediction_file.hpp).
#include "prediction_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <string>
#include <system_error>

#include "kiln/errors.hpp"

namespace kiln::cli {
namespace fs = std::filesystem;

PredictionFile::Format PredictionFile::format_of(const fs::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".csv") return Format::csv;
  if (ext == ".jsonl") return Format::jsonl;
  throw ConfigError(fmt::format("--output {}: the file name must end in .csv or .jsonl (that picks the format)",
                                path.string()));
}

void PredictionFile::check_name(const fs::path& path) { (void)format_of(path); }

PredictionFile::PredictionFile(const fs::path& path, std::int64_t top_k) : path_(path), format_(format_of(path)) {
  temp_ = path;
  temp_ += fmt::format(".partial-{}", ::getpid());
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw IoError(fmt::format("--output {}: cannot create {}", path.string(), temp_.string()));
  if (format_ == Format::csv) {
    out_ << "index,label";
    for (std::int64_t k = 1; k <= top_k; ++k) out_ << fmt::format(",top{0},prob{0}", k);
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

void PredictionFile::write(std::int64_t index, std::int32_t label, std::span<const std::int64_t> classes,
                           std::span<const double> probs) {
  // 17 significant digits: a double read back is the double written, so sums and comparisons
  // made from the file are exact.
  if (format_ == Format::csv) {
    out_ << index << ',' << label;
    for (std::size_t k = 0; k < classes.size(); ++k) out_ << fmt::format(",{},{:.17g}", classes[k], probs[k]);
    out_ << '\n';
  } else {
    out_ << fmt::format("{{\"index\":{},\"label\":{},\"top\":[{}],\"prob\":[", index, label, fmt::join(classes, ","));
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
