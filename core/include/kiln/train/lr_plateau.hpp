// Reducing the learning rate when a metric stops improving: `[schedule] type = "plateau"`, as
// Keras' ReduceLROnPlateau and PyTorch's torch.optim.lr_scheduler.ReduceLROnPlateau.
//
// After each epoch the watched metric (early_stop.hpp's names and goals) is compared with the
// best so far: better by more than min_delta (min_delta_mode "abs", Keras' rule), or by more than
// min_delta times the best ("rel", PyTorch's default threshold_mode), is an improvement and
// resets the count of bad epochs. When `patience` bad epochs have been counted, the rate is multiplied by `factor`
// (never below min_lr), the count restarts, and the next `cooldown` epochs are not counted.
// So patience = 2 reduces after the second bad epoch in a row (Keras' meaning; PyTorch's
// patience is one less: it reduces after patience + 1), and cooldown = 1 leaves exactly one
// epoch uncounted (PyTorch's meaning). tests/golden/make_plateau_golden.py checks the rule
// against PyTorch's implementation.
//
// The state (the rate's scale, best value, counts) goes into every checkpoint, so a resumed run
// trains at the rate the uninterrupted one would. Every rank sees the same reduced metrics, so
// every rank reduces at the same epoch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kiln/params.hpp"
#include "kiln/train/early_stop.hpp"

namespace kiln::train {

struct PlateauOptions {
  WatchedMetric metric;
  double factor = 0.1;     ///< in (0, 1)
  std::int64_t patience = 10;
  std::int64_t cooldown = 0;
  double min_delta = 1e-4;
  bool relative = false;   ///< min_delta_mode = "rel": the margin is min_delta * |best|, as PyTorch's
  double min_lr = 0;       ///< the rate is never reduced below it
};

/// Reads the plateau keys of a validated [schedule] table when `type` is "plateau"; nullopt for
/// every other type. Throws ConfigError naming the key for a metric the run cannot watch.
std::optional<PlateauOptions> plateau_options(const std::string& type, const ParamMap& schedule, bool has_eval_split,
                                              bool has_ema = false);

class LrPlateau {
 public:
  LrPlateau(PlateauOptions options, double base_lr);
  /// What the base rate is multiplied by now: 1 until the first reduction, then factor^n (or
  /// min_lr / base where the floor stopped it).
  double scale() const { return scale_; }
  /// Records epoch `epoch` (0-based); returns what changed, for the log, when it reduced the rate
  /// ("lr 0.01 -> 0.001: eval_loss (min) has not improved by more than 0.0001 for 3 epochs; best
  /// 0.4012 after epoch 5").
  std::optional<std::string> update(std::int64_t epoch, const EpochMetrics& m);
  std::string describe() const;

  /// For checkpoints: "lr_plateau.scale", ".best", ".best_epoch", ".bad_epochs", ".cooldown_left",
  /// ".reductions".
  std::map<std::string, double> state() const;
  /// Takes the values `state()` wrote; a checkpoint without them (another schedule) leaves the
  /// plateau at its start.
  void load_state(const std::map<std::string, double>& state);
  std::int64_t reductions() const { return reductions_; }
  const WatchedMetric& metric() const { return opt_.metric; }

 private:
  bool improves(double value, double best) const;
  /// "0.0001", or "0.01% of the best" in relative mode.
  std::string margin() const;

  PlateauOptions opt_;
  double base_lr_;
  double scale_ = 1;
  bool has_best_ = false;
  double best_ = 0;
  std::int64_t best_epoch_ = -1, bad_epochs_ = 0, cooldown_left_ = 0, reductions_ = 0;
};

}  // namespace kiln::train
