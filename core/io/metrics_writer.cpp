// JSON-lines writer (see the header). Numbers are written with enough digits to round-trip;
// non-finite numbers (which JSON lacks) are written as null.
#include "kiln/io/metrics_writer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"
#include "kiln/io/metric_tags.hpp"
#include "kiln/io/metrics_trim.hpp"

namespace kiln::io {

MetricsRecord& MetricsRecord::add(std::string key, double value) {
  fields_.emplace_back(std::move(key), value);
  return *this;
}
MetricsRecord& MetricsRecord::add(std::string key, std::int64_t value) {
  fields_.emplace_back(std::move(key), value);
  return *this;
}
MetricsRecord& MetricsRecord::add(std::string key, std::string value) {
  fields_.emplace_back(std::move(key), std::move(value));
  return *this;
}
MetricsRecord& MetricsRecord::add_field(std::string key, Field::second_type value) {
  fields_.emplace_back(std::move(key), std::move(value));
  return *this;
}

std::string MetricsRecord::to_json() const {
  std::string out = "{";
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (i) out += ", ";
    out += json_quoted(fields_[i].first) + ": ";
    const auto& v = fields_[i].second;
    if (const double* d = std::get_if<double>(&v)) {
      if (!std::isfinite(*d)) {
        out += "null";
      } else {
        // Keep a decimal point on whole numbers so JSON readers see a float (1.0, not 1).
        std::string text = fmt::format("{}", *d);
        if (text.find_first_of(".e") == std::string::npos) text += ".0";
        out += text;
      }
    } else if (const std::int64_t* n = std::get_if<std::int64_t>(&v)) {
      out += fmt::format("{}", *n);
    } else {
      out += json_quoted(std::get<std::string>(v));
    }
  }
  return out + "}";
}

MetricsWriter::MetricsWriter(const std::filesystem::path& path, std::function<double()> wall_clock)
    : path_(path), wall_clock_(std::move(wall_clock)) {
  if (!wall_clock_) {
    wall_clock_ = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
  }
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw IoError(fmt::format("cannot open {} for appending: {}", path.string(), std::strerror(errno)));
  tensorboard_ = std::make_unique<TensorBoardWriter>(path.parent_path() / "tb");
}

std::int64_t MetricsWriter::drop_records_after(std::int64_t epochs_done, std::int64_t steps_done) {
  // Closed first: the rewrite replaces the file by rename, and an open handle would keep
  // appending to the replaced one.
  std::fclose(file_);
  file_ = nullptr;
  const std::int64_t dropped = drop_metrics_after(path_, epochs_done, steps_done);
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw IoError(fmt::format("cannot open {} for appending: {}", path_.string(), std::strerror(errno)));
  return dropped;
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const MetricsRecord& record) {
  double wall_time = 0;
  bool has_wall_time = false;
  std::string split = "metrics";
  std::int64_t step = 0;
  for (const auto& [key, value] : record.fields()) {
    if (key == "split" && std::holds_alternative<std::string>(value)) split = std::get<std::string>(value);
    if (key == "step" && std::holds_alternative<std::int64_t>(value)) step = std::get<std::int64_t>(value);
    if (key == "wall_time" && std::holds_alternative<double>(value)) {
      wall_time = std::get<double>(value);
      has_wall_time = true;
    }
  }
  MetricsRecord stamped;
  if (!has_wall_time) {
    wall_time = wall_clock_();
    stamped.add("wall_time", wall_time);
    for (const auto& [key, value] : record.fields()) stamped.add_field(key, value);
  }
  const std::string line = (has_wall_time ? record : stamped).to_json() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw IoError(fmt::format("cannot append to {}: {}", path_.string(), std::strerror(errno)));
  }
  std::vector<std::pair<std::string, double>> scalars;
  for (const auto& [key, value] : record.fields()) {
    const auto tag = tensorboard_tag(split, key);
    if (!tag) continue;
    if (const double* d = std::get_if<double>(&value)) scalars.emplace_back(*tag, *d);
    if (const std::int64_t* n = std::get_if<std::int64_t>(&value)) scalars.emplace_back(*tag, static_cast<double>(*n));
  }
  tensorboard_->add_scalars(scalars, step, wall_time);
}

void MetricsWriter::write_histograms(const std::vector<std::pair<std::string, Histogram>>& histograms,
                                     std::int64_t step) {
  tensorboard_->add_histograms(histograms, step, wall_clock_());
}

}  // namespace kiln::io
