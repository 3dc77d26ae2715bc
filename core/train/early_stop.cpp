// Watched metrics and early stopping (see the header).
#include "kiln/train/early_stop.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kiln/errors.hpp"
#include "kiln/train/keys_without_effect.hpp"

namespace kiln::train {
namespace {

constexpr kiln_param_spec_v1 kEarlyStop[] = {
    {"metric", KILN_PARAM_STRING, "\"\"", nullptr,
     "Stop when this epoch metric stops improving: eval_loss, eval_accuracy, eval_accuracy_top5 (need [data.eval]), "
     "eval_ema_loss, eval_ema_accuracy, eval_ema_accuracy_top5 (also [ema]), train_loss, train_accuracy; \"\" = never."},
    {"mode", KILN_PARAM_STRING, "\"auto\"", "auto|min|max", "Whether lower or higher is better; auto: min for a loss, max for an accuracy."},
    {"patience", KILN_PARAM_INT, "3", nullptr, "Epochs without an improvement after which the run stops.", "1", nullptr},
    {"min_delta", KILN_PARAM_FLOAT, "0.0", nullptr, "How much better than the best a value must be to count as an improvement.",
     "0", nullptr},
};

constexpr const char* kMetricNames =
    "eval_loss, eval_accuracy, eval_accuracy_top5, eval_ema_loss, eval_ema_accuracy, eval_ema_accuracy_top5, "
    "train_loss, train_accuracy";

/// The slot of an evaluation metric in `m`; null for a name that is not one.
const std::optional<double>* eval_slot(const EpochMetrics& m, const std::string& name) {
  if (name == "eval_loss") return &m.eval_loss;
  if (name == "eval_accuracy") return &m.eval_accuracy;
  if (name == kEvalAccuracyTop5) return &m.eval_accuracy_top5;
  if (name == "eval_ema_loss") return &m.eval_ema_loss;
  if (name == "eval_ema_accuracy") return &m.eval_ema_accuracy;
  if (name == kEvalEmaAccuracyTop5) return &m.eval_ema_accuracy_top5;
  return nullptr;
}

}  // namespace

std::span<const kiln_param_spec_v1> early_stop_schema() { return kEarlyStop; }

bool is_top_k_metric(const std::string& name) { return name == kEvalAccuracyTop5 || name == kEvalEmaAccuracyTop5; }

double WatchedMetric::of(const EpochMetrics& m) const {
  if (name == "train_loss") return m.train_loss;
  if (name == "train_accuracy") return m.train_accuracy;
  const std::optional<double>* v = eval_slot(m, name);
  if (v == nullptr || !*v) throw Error(fmt::format("metric {} needs an evaluation, and this epoch had none", name));
  return **v;
}

bool WatchedMetric::improves(double value, double best, double min_delta) const {
  return goal == Goal::min ? value < best - min_delta : value > best + min_delta;
}

WatchedMetric parse_watched_metric(const std::string& name, const std::string& name_where, const std::string& mode,
                                   bool has_eval_split, bool has_ema) {
  WatchedMetric m;
  m.name = name;
  m.where = name_where;
  const bool is_loss = name == "eval_loss" || name == "eval_ema_loss" || name == "train_loss";
  const bool is_accuracy = name == "eval_accuracy" || name == "eval_ema_accuracy" || is_top_k_metric(name) ||
                           name == "train_accuracy";
  if (!is_loss && !is_accuracy) {
    throw ConfigError(fmt::format("{} = \"{}\" is not a metric; valid metrics: {}", name_where, name, kMetricNames));
  }
  if (name.rfind("eval_", 0) == 0 && !has_eval_split) {
    throw ConfigError(fmt::format("{} = \"{}\" needs an eval split, and this run has none: add a [data.eval] "
                                  "table or watch train_loss / train_accuracy",
                                  name_where, name));
  }
  if (name.rfind("eval_ema_", 0) == 0 && !has_ema) {
    throw ConfigError(fmt::format("{} = \"{}\" is a metric of the averaged weights, and this run evaluates none: "
                                  "set [ema] decay (with evaluate = true) or watch {}",
                                  name_where, name, "eval_" + name.substr(9)));
  }
  if (mode == "min") m.goal = Goal::min;
  else if (mode == "max") m.goal = Goal::max;
  else m.goal = is_loss ? Goal::min : Goal::max;  // "auto" (the schema allows nothing else)
  return m;
}

std::optional<EarlyStopOptions> early_stop_options(const ParamMap& t, bool has_eval_split, bool has_ema) {
  const std::string name = t.get_string("metric");
  if (name.empty()) {
    refuse_keys_without_effect(t, kEarlyStop, {"mode", "patience", "min_delta"},
                               "early stopping is off (early_stop.metric is \"\"); set early_stop.metric to the metric "
                               "to watch, or remove the key");
    return std::nullopt;
  }
  EarlyStopOptions o;
  o.metric = parse_watched_metric(name, t.where("metric"), t.get_string("mode"), has_eval_split, has_ema);
  o.patience = t.get_int("patience");
  o.min_delta = t.get_float("min_delta");
  if (o.patience < 1) throw ConfigError(t.where("patience") + " must be at least 1");
  if (!(o.min_delta >= 0) || !std::isfinite(o.min_delta)) {
    throw ConfigError(t.where("min_delta") + " must be a finite number >= 0");
  }
  return o;
}

EarlyStopper::EarlyStopper(EarlyStopOptions options) : opt_(std::move(options)) {}

bool EarlyStopper::update(std::int64_t epoch, const EpochMetrics& m) {
  const double v = opt_.metric.of(m);
  // A nan never improves (every comparison with it is false) and so counts as a bad epoch.
  if (!has_best_ ? !std::isnan(v) : opt_.metric.improves(v, best_, opt_.min_delta)) {
    has_best_ = true;
    best_ = v;
    best_epoch_ = epoch;
    bad_epochs_ = 0;
    return false;
  }
  ++bad_epochs_;
  return bad_epochs_ >= opt_.patience;
}

std::string EarlyStopper::reason() const {
  std::string best = has_best_ ? fmt::format("; best {:.6g} after epoch {}", best_, best_epoch_ + 1) : "";
  return fmt::format("early stopping: {} ({}) has not improved by more than {} for {} epoch{}{}", opt_.metric.name,
                     opt_.metric.goal_name(), opt_.min_delta, bad_epochs_, bad_epochs_ == 1 ? "" : "s", best);
}

std::map<std::string, double> EarlyStopper::state() const {
  std::map<std::string, double> s = {{"early_stop.bad_epochs", static_cast<double>(bad_epochs_)},
                                     {"early_stop.best_epoch", static_cast<double>(best_epoch_)}};
  if (has_best_) s["early_stop.best"] = best_;
  return s;
}

void EarlyStopper::load_state(const std::map<std::string, double>& s) {
  if (auto it = s.find("early_stop.bad_epochs"); it != s.end()) bad_epochs_ = static_cast<std::int64_t>(it->second);
  if (auto it = s.find("early_stop.best_epoch"); it != s.end()) best_epoch_ = static_cast<std::int64_t>(it->second);
  if (auto it = s.find("early_stop.best"); it != s.end()) {
    has_best_ = true;
    best_ = it->second;
  }
}

}  // namespace kiln::train
