// Epoch metrics to watch, early stopping on one of them, and the [early_stop] table.
//
// A watched metric is one of the numbers each epoch ends with: eval_loss, eval_accuracy,
// eval_accuracy_top5 (need an eval split, [data.eval]; top-5 also a run that counts it,
// check_watched_top_k in top_k_counter.hpp), the same three of the averaged weights
// (eval_ema_loss, eval_ema_accuracy, eval_ema_accuracy_top5: also need [ema] evaluated,
// weight_ema.hpp), train_loss, train_accuracy. Its goal is min or max;
// "auto" means min for a loss and max for an accuracy. keep_best ([checkpoint]) uses the same
// names and goals.
//
// EarlyStopper, as Keras' EarlyStopping and Lightning's: after each evaluated epoch, a value
// better than the best so far by more than min_delta is an improvement and resets the count of
// epochs without one; when that count reaches `patience`, the run stops after this epoch (its
// checkpoint is written, the run ends normally). Its state (best value, epochs without
// improvement) is saved in every checkpoint, so a resumed run stops where the uninterrupted one
// would.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::train {

/// Keys of the [early_stop] table: metric ("" = off), mode, patience, min_delta.
std::span<const kiln_param_spec_v1> early_stop_schema();

/// The name of the test split's top-5 accuracy as a watched metric, and of the averaged weights'.
inline constexpr const char* kEvalAccuracyTop5 = "eval_accuracy_top5";
inline constexpr const char* kEvalEmaAccuracyTop5 = "eval_ema_accuracy_top5";

/// The numbers an epoch ends with (eval ones absent without an eval split; top-5 also absent
/// where the run does not count it, top_k_counter.hpp; eval_ema_* absent without [ema] evaluated).
struct EpochMetrics {
  double train_loss = 0, train_accuracy = 0;
  std::optional<double> eval_loss, eval_accuracy, eval_accuracy_top5;
  std::optional<double> eval_ema_loss, eval_ema_accuracy, eval_ema_accuracy_top5;
};

enum class Goal : std::uint8_t { min, max };

struct WatchedMetric {
  std::string name;  ///< "eval_loss", ...
  Goal goal = Goal::min;
  std::string where;  ///< the key that chose it, "early_stop.metric (run.toml:12)", for errors
  /// The value of this metric in `m`; throws Error when it is an eval metric and m has none.
  double of(const EpochMetrics& m) const;
  /// True when `value` is better than `best` by more than `min_delta`.
  bool improves(double value, double best, double min_delta) const;
  const char* goal_name() const { return goal == Goal::min ? "min" : "max"; }
  /// Whether it is read from an evaluation (eval_*), which not every epoch has
  /// (run.eval_every_epochs).
  bool needs_eval() const { return name.starts_with("eval_"); }
};

/// Parses a metric name and a mode ("auto" | "min" | "max") set at `name_where` / `mode_where`.
/// Throws ConfigError for an unknown name, naming the valid ones, for an eval metric when the
/// run has no eval split, and for an eval_ema_* metric when it evaluates no averaged weights
/// (`has_ema`: [ema] on with evaluate = true).
WatchedMetric parse_watched_metric(const std::string& name, const std::string& name_where, const std::string& mode,
                                   bool has_eval_split, bool has_ema = false);

/// Whether `name` is a top-5 accuracy (the test split's or the averaged weights').
bool is_top_k_metric(const std::string& name);

struct EarlyStopOptions {
  WatchedMetric metric;
  std::int64_t patience = 3;
  double min_delta = 0;
};

/// Reads the validated [early_stop] table; nullopt when metric is "" (off).
std::optional<EarlyStopOptions> early_stop_options(const ParamMap& table, bool has_eval_split, bool has_ema = false);

class EarlyStopper {
 public:
  explicit EarlyStopper(EarlyStopOptions options);
  /// Records epoch `epoch` (0-based); returns true when the run should stop after it.
  bool update(std::int64_t epoch, const EpochMetrics& m);
  /// Why it stopped, for the log ("early stopping: eval_loss has not improved by more than 0 for
  /// 3 epochs; best 0.4012 after epoch 5").
  std::string reason() const;
  /// Whether the rule has already ended the run: true right after update() returned true, and
  /// after load_state() of the checkpoint written at that stop (a resumed run then trains no
  /// further, as the uninterrupted run would not have).
  bool has_stopped() const { return bad_epochs_ >= opt_.patience; }
  const WatchedMetric& metric() const { return opt_.metric; }

  /// For checkpoints: "early_stop.best", "early_stop.best_epoch", "early_stop.bad_epochs".
  std::map<std::string, double> state() const;
  void load_state(const std::map<std::string, double>& state);

 private:
  EarlyStopOptions opt_;
  bool has_best_ = false;
  double best_ = 0;
  std::int64_t best_epoch_ = -1, bad_epochs_ = 0;
};

}  // namespace kiln::train
