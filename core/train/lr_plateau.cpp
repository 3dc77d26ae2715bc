// Reducing the learning rate on a plateau (see the header).
#include "kiln/train/lr_plateau.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/errors.hpp"

namespace kiln::train {

std::optional<PlateauOptions> plateau_options(const std::string& type, const ParamMap& t, bool has_eval_split,
                                              bool has_ema) {
  if (type != "plateau") return std::nullopt;
  PlateauOptions o;
  o.metric =
      parse_watched_metric(t.get_string("metric"), t.where("metric"), t.get_string("mode"), has_eval_split, has_ema);
  // The schema bounds each key (factor in (0, 1), patience >= 1, ...); the reads cannot fail.
  o.factor = t.get_float("factor");
  o.patience = t.get_int("patience");
  o.cooldown = t.get_int("cooldown");
  o.min_delta = t.get_float("min_delta");
  o.relative = t.get_string("min_delta_mode") == "rel";
  if (o.relative && o.min_delta >= 1) {
    // A margin of the whole best or more: a loss would have to fall to 0 or below, an accuracy
    // double, so the rate would fall every `patience` epochs whatever happens.
    throw ConfigError(fmt::format("{} = {} with min_delta_mode = \"rel\" is {}% of the best; a relative margin must be "
                                  "below 1 (0.01 is 1%)",
                                  t.where("min_delta"), o.min_delta, o.min_delta * 100));
  }
  o.min_lr = t.get_float("min_lr");
  return o;
}

LrPlateau::LrPlateau(PlateauOptions options, double base_lr) : opt_(std::move(options)), base_lr_(base_lr) {}

bool LrPlateau::improves(double value, double best) const {
  if (!opt_.relative) return opt_.metric.improves(value, best, opt_.min_delta);
  // PyTorch's threshold_mode "rel", written as it does (best * (1 -/+ threshold)), so the two
  // decide alike, also for a best of 0 or below and for the infinite best before the first epoch.
  return opt_.metric.goal == Goal::min ? value < best * (1 - opt_.min_delta) : value > best * (1 + opt_.min_delta);
}

std::string LrPlateau::margin() const {
  return opt_.relative ? fmt::format("{}% of the best", opt_.min_delta * 100) : fmt::format("{}", opt_.min_delta);
}

std::optional<std::string> LrPlateau::update(std::int64_t epoch, const EpochMetrics& m) {
  const double v = opt_.metric.of(m);
  // Before the first improvement the best is the worst value there is, as in Keras and PyTorch:
  // an infinite loss is no improvement on it, and a nan never improves (every comparison with it
  // is false), so both count as bad epochs.
  const double inf = std::numeric_limits<double>::infinity();
  const double best = has_best_ ? best_ : opt_.metric.goal == Goal::min ? inf : -inf;
  if (improves(v, best)) {
    has_best_ = true;
    best_ = v;
    best_epoch_ = epoch;
    bad_epochs_ = 0;
  } else {
    ++bad_epochs_;
  }
  if (cooldown_left_ > 0) {  // the epochs right after a reduction are not counted
    --cooldown_left_;
    bad_epochs_ = 0;
  }
  if (bad_epochs_ < opt_.patience) return std::nullopt;
  const std::int64_t bad = bad_epochs_;
  bad_epochs_ = 0;
  cooldown_left_ = opt_.cooldown;
  const double floor = base_lr_ > 0 ? opt_.min_lr / base_lr_ : 0.0;
  const double reduced = std::max(scale_ * opt_.factor, floor);
  if (!(reduced < scale_)) return std::nullopt;  // already at min_lr
  const double before = base_lr_ * scale_;
  scale_ = reduced;
  ++reductions_;
  const std::string best_so_far =
      has_best_ ? fmt::format("; best {:.6g} after epoch {}", best_, best_epoch_ + 1) : "";
  return fmt::format("lr {:.6g} -> {:.6g}{}: {} ({}) has not improved by more than {} for {} epoch{}{}", before,
                     base_lr_ * scale_, reduced == floor ? " (min_lr)" : "", opt_.metric.name, opt_.metric.goal_name(),
                     margin(), bad, bad == 1 ? "" : "s", best_so_far);
}

std::string LrPlateau::describe() const {
  return fmt::format("on {} ({}): x{} after {} epoch{} without an improvement > {}, cooldown {}, min_lr {}",
                     opt_.metric.name, opt_.metric.goal_name(), opt_.factor, opt_.patience,
                     opt_.patience == 1 ? "" : "s", margin(), opt_.cooldown, opt_.min_lr);
}

std::map<std::string, double> LrPlateau::state() const {
  std::map<std::string, double> s = {{"lr_plateau.scale", scale_},
                                     {"lr_plateau.best_epoch", static_cast<double>(best_epoch_)},
                                     {"lr_plateau.bad_epochs", static_cast<double>(bad_epochs_)},
                                     {"lr_plateau.cooldown_left", static_cast<double>(cooldown_left_)},
                                     {"lr_plateau.reductions", static_cast<double>(reductions_)}};
  if (has_best_) s["lr_plateau.best"] = best_;
  return s;
}

void LrPlateau::load_state(const std::map<std::string, double>& s) {
  const auto count = [&](const char* key, std::int64_t& out) {
    if (auto it = s.find(key); it != s.end()) out = static_cast<std::int64_t>(it->second);
  };
  if (auto it = s.find("lr_plateau.scale"); it != s.end()) {
    // Reductions only ever shrink the rate: anything else did not come from update().
    if (!(it->second > 0 && it->second <= 1)) {
      throw DataError(fmt::format("lr_plateau.scale = {} is not in (0, 1]", it->second));
    }
    scale_ = it->second;
  }
  count("lr_plateau.best_epoch", best_epoch_);
  count("lr_plateau.bad_epochs", bad_epochs_);
  count("lr_plateau.cooldown_left", cooldown_left_);
  count("lr_plateau.reductions", reductions_);
  if (auto it = s.find("lr_plateau.best"); it != s.end()) {
    has_best_ = true;
    best_ = it->second;
  }
}

}  // namespace kiln::train
