// `kiln eval --per-class`: how well each class is recognised, as scikit-learn's
// classification_report gives it (precision, recall, F1, support), with the classes' names where
// the run knows them. The predicted class is the argmax of the logits, the lower class winning a
// tie, as the overall accuracy counts it, so the correct counts add up to accuracy x samples.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

class PerClassReport {
 public:
  /// `names` may be shorter than `classes` (or empty); it must outlive the report.
  PerClassReport(std::int64_t classes, const std::vector<std::string>& names);

  /// One batch: `rows` labels and rows x classes logits (EvalSession::run_on_host's layout).
  void add(std::int64_t rows, const std::int32_t* labels, const float* logits);

  /// A table, one line per class that occurs as a label or a prediction (others have nothing to
  /// say), then the macro average over the classes with samples.
  void write_table(std::ostream& out) const;
  /// The same as a JSON array of objects, for `--json`'s "per_class"; an undefined figure (the
  /// precision of a class never predicted) is null.
  std::string json() const;

 private:
  struct Row {
    std::int64_t cls = 0;
    std::int64_t samples = 0, predicted = 0, correct = 0;
    std::optional<double> precision, recall, f1;
  };
  std::vector<Row> rows() const;
  std::string name_of(std::int64_t cls) const;

  std::int64_t classes_;
  const std::vector<std::string>& names_;
  std::vector<std::int64_t> samples_, predicted_, correct_;
};

}  // namespace kiln::cli
