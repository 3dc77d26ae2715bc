// Per-class figures of `kiln eval --per-class` (see per_class_report.hpp).
#include "per_class_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/io/metrics_writer.hpp"

namespace kiln::cli {
namespace {

std::string figure(const std::optional<double>& v) { return v ? fmt::format("{:.4f}", *v) : "-"; }
double or_nan(const std::optional<double>& v) { return v.value_or(std::numeric_limits<double>::quiet_NaN()); }

}  // namespace

PerClassReport::PerClassReport(std::int64_t classes, const std::vector<std::string>& names)
    : classes_(classes),
      names_(names),
      samples_(static_cast<std::size_t>(classes)),
      predicted_(static_cast<std::size_t>(classes)),
      correct_(static_cast<std::size_t>(classes)) {}

void PerClassReport::add(std::int64_t rows, const std::int32_t* labels, const float* logits) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes_;
    // max_element keeps the first of equal maxima: the lower class wins a tie.
    const auto predicted = static_cast<std::size_t>(std::max_element(row, row + classes_) - row);
    const auto label = static_cast<std::size_t>(labels[r]);  // the loader checked it is in range
    ++samples_[label];
    ++predicted_[predicted];
    if (predicted == label) ++correct_[label];
  }
}

std::vector<PerClassReport::Row> PerClassReport::rows() const {
  std::vector<Row> out;
  for (std::size_t c = 0; c < samples_.size(); ++c) {
    if (samples_[c] == 0 && predicted_[c] == 0) continue;
    Row r{static_cast<std::int64_t>(c), samples_[c], predicted_[c], correct_[c], {}, {}, {}};
    if (r.predicted > 0) r.precision = static_cast<double>(r.correct) / static_cast<double>(r.predicted);
    if (r.samples > 0) r.recall = static_cast<double>(r.correct) / static_cast<double>(r.samples);
    if (r.precision && r.recall) {
      const double sum = *r.precision + *r.recall;
      r.f1 = sum > 0 ? 2 * *r.precision * *r.recall / sum : 0.0;
    }
    out.push_back(r);
  }
  return out;
}

std::string PerClassReport::name_of(std::int64_t cls) const {
  return cls < static_cast<std::int64_t>(names_.size()) ? names_[static_cast<std::size_t>(cls)] : "";
}

void PerClassReport::write_table(std::ostream& out) const {
  const std::vector<Row> all = rows();
  constexpr std::string_view kAverage = "macro average";
  std::size_t name_width = kAverage.size();
  for (const Row& r : all) name_width = std::max(name_width, name_of(r.cls).size());
  out << fmt::format("{:>5}  {:<{}}  {:>9}  {:>9}  {:>9}  {:>6}  {:>6}\n", "class", "name", name_width, "samples",
                     "predicted", "precision", "recall", "f1");
  double precision_sum = 0, recall_sum = 0, f1_sum = 0;
  std::int64_t with_samples = 0;
  for (const Row& r : all) {
    out << fmt::format("{:>5}  {:<{}}  {:>9}  {:>9}  {:>9}  {:>6}  {:>6}\n", r.cls, name_of(r.cls), name_width,
                       r.samples, r.predicted, figure(r.precision), figure(r.recall), figure(r.f1));
    if (r.samples == 0) continue;
    // scikit-learn's macro average: a class never predicted counts with precision (and F1) 0.
    ++with_samples;
    precision_sum += r.precision.value_or(0.0);
    recall_sum += r.recall.value_or(0.0);
    f1_sum += r.f1.value_or(0.0);
  }
  if (with_samples > 0) {
    const auto n = static_cast<double>(with_samples);
    out << fmt::format("{:>5}  {:<{}}  {:>9}  {:>9}  {:>9.4f}  {:>6.4f}  {:>6.4f}\n", "", kAverage, name_width,
                       "", "", precision_sum / n, recall_sum / n, f1_sum / n);
  }
}

std::string PerClassReport::json() const {
  std::string out = "[";
  bool first = true;
  for (const Row& r : rows()) {
    io::MetricsRecord rec;  // its writer turns the NaN of an undefined figure into null
    rec.add("class", r.cls);
    if (!names_.empty()) rec.add("name", name_of(r.cls));
    rec.add("samples", r.samples)
        .add("predicted", r.predicted)
        .add("precision", or_nan(r.precision))
        .add("recall", or_nan(r.recall))
        .add("f1", or_nan(r.f1));
    out += (first ? "" : ", ") + rec.to_json();
    first = false;
  }
  return out + "]";
}

}  // namespace kiln::cli
