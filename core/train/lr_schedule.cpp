// Learning-rate schedules (see the header for the formulas).
#include "kiln/train/lr_schedule.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kiln/errors.hpp"

namespace kiln::train {
namespace {

// Keys every schedule takes, then each type's own; a key of another type is an unknown key (with
// did-you-mean and file:line) like any other, as for [optimizer], and config.toml holds only keys
// that apply: gamma under cosine is refused, not ignored.
constexpr kiln_param_spec_v1 kWarmup = {
    "warmup_epochs", KILN_PARAM_FLOAT, "0.0", nullptr, "Linear warmup length in epochs (fractions allowed).", "0", nullptr};
constexpr kiln_param_spec_v1 kCosineMinLr = {"min_lr", KILN_PARAM_FLOAT, "0.0", nullptr,
                                             "The floor the rate decays to at the end of the run.", "0", nullptr};
constexpr kiln_param_spec_v1 kPolynomialMinLr = {"min_lr", KILN_PARAM_FLOAT, "0.0", nullptr,
                                                 "The rate the decay ends at, one step past the last.", "0", nullptr};
constexpr kiln_param_spec_v1 kPlateauMinLr = {"min_lr", KILN_PARAM_FLOAT, "0.0", nullptr,
                                              "The rate is never lowered below it.", "0", nullptr};

constexpr kiln_param_spec_v1 kConstantSchema[] = {kWarmup};
constexpr kiln_param_spec_v1 kCosineSchema[] = {kWarmup, kCosineMinLr};
constexpr kiln_param_spec_v1 kStepSchema[] = {
    kWarmup,
    {"milestones", KILN_PARAM_INT_LIST, "[]", nullptr, "Epochs at which the rate is multiplied by gamma.", "0", nullptr},
    {"gamma", KILN_PARAM_FLOAT, "0.1", nullptr, "Factor applied at each milestone.", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
};
constexpr kiln_param_spec_v1 kPolynomialSchema[] = {
    kWarmup,
    kPolynomialMinLr,
    {"power", KILN_PARAM_FLOAT, "1.0", nullptr,
     "Exponent of the decay: 1 is linear (Hugging Face's default schedule), 2 quadratic, 0.9 the 'poly' of "
     "segmentation recipes.",
     "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
};
constexpr kiln_param_spec_v1 kPlateauSchema[] = {
    kWarmup,
    kPlateauMinLr,
    {"metric", KILN_PARAM_STRING, "\"eval_loss\"", nullptr,
     "The epoch metric to watch: eval_loss, eval_accuracy, eval_accuracy_top5 (need [data.eval]), eval_ema_loss, "
     "eval_ema_accuracy, eval_ema_accuracy_top5 (also [ema]), train_loss, train_accuracy."},
    {"mode", KILN_PARAM_STRING, "\"auto\"", "auto|min|max",
     "Whether lower or higher is better; auto: min for a loss, max for an accuracy."},
    {"factor", KILN_PARAM_FLOAT, "0.1", nullptr, "What the rate is multiplied by at each reduction.", "0", "1",
     KILN_PARAM_MIN_EXCLUSIVE | KILN_PARAM_MAX_EXCLUSIVE},
    {"patience", KILN_PARAM_INT, "10", nullptr, "Epochs without an improvement after which the rate is lowered.", "1",
     nullptr},
    {"cooldown", KILN_PARAM_INT, "0", nullptr, "Epochs after a reduction that are not counted.", "0", nullptr},
    {"min_delta", KILN_PARAM_FLOAT, "0.0001", nullptr,
     "How much better than the best a value must be to count as an improvement.", "0", nullptr},
    {"min_delta_mode", KILN_PARAM_STRING, "\"abs\"", "abs|rel",
     "abs: better than the best by more than min_delta (Keras); rel: by more than min_delta times the best "
     "(PyTorch's default threshold_mode)."},
};

double float_or(const ParamMap& t, std::string_view key, double fallback) {
  return t.contains(key) ? t.get_float(key) : fallback;
}

/// `type`'s place in schedule_types(), which is the order of LrSchedule::Kind.
LrSchedule::Kind kind_of(const std::string& type) {
  const auto types = schedule_types();
  const auto it = std::find(types.begin(), types.end(), type);
  if (it == types.end()) {
    throw ConfigError(fmt::format("schedule.type = '{}' is not one of {}", type, fmt::join(types, ", ")));
  }
  return static_cast<LrSchedule::Kind>(it - types.begin());
}

}  // namespace

std::span<const kiln_param_spec_v1> schedule_schema(const std::string& type) {
  switch (kind_of(type)) {
    case LrSchedule::Kind::constant: return kConstantSchema;
    case LrSchedule::Kind::cosine: return kCosineSchema;
    case LrSchedule::Kind::step: return kStepSchema;
    case LrSchedule::Kind::plateau: return kPlateauSchema;
    case LrSchedule::Kind::polynomial: return kPolynomialSchema;
  }
  return {};
}

std::vector<kiln_param_spec_v1> schedule_keys_of_other_types(const std::string& type) {
  const auto own = schedule_schema(type);
  const auto has = [](std::span<const kiln_param_spec_v1> keys, std::string_view name) {
    return std::any_of(keys.begin(), keys.end(), [&](const kiln_param_spec_v1& k) { return name == k.name; });
  };
  std::vector<kiln_param_spec_v1> out;
  for (std::string_view other : schedule_types()) {
    for (const kiln_param_spec_v1& k : schedule_schema(std::string(other))) {
      if (!has(own, k.name) && !has(out, k.name)) out.push_back(k);
    }
  }
  return out;
}

std::span<const std::string_view> schedule_types() {
  static constexpr std::string_view kTypes[] = {"constant", "cosine", "step", "plateau",
                                                "polynomial"};  // LrSchedule::Kind's order
  return kTypes;
}

LrSchedule::LrSchedule(const std::string& type, const ParamMap& t, double base_lr,
                       std::int64_t steps_per_epoch, std::int64_t epochs, std::optional<PlateauOptions> plateau)
    : base_lr_(base_lr), min_lr_(float_or(t, "min_lr", 0.0)), gamma_(float_or(t, "gamma", 1.0)),
      power_(float_or(t, "power", 1.0)),
      total_steps_(steps_per_epoch * epochs), steps_per_epoch_(steps_per_epoch) {
  kind_ = kind_of(type);
  if (t.contains("milestones")) milestones_ = t.get<std::vector<std::int64_t>>("milestones");
  if (kind_ == Kind::plateau) {
    if (!plateau) throw std::logic_error("LrSchedule: the plateau schedule needs plateau_options() of its table");
    plateau_.emplace(std::move(*plateau), base_lr);
  }
  const double warmup = float_or(t, "warmup_epochs", 0.0);
  if (warmup < 0) throw ConfigError(t.where("warmup_epochs") + " must be >= 0");
  // Saturated: 1e300 epochs of warmup would overflow llround (which then returns LLONG_MIN, that
  // is no warmup at all); 2^62 steps is a warmup no run ends.
  const double warmup_steps = warmup * static_cast<double>(steps_per_epoch);
  warmup_steps_ = warmup_steps >= 0x1p62 ? std::int64_t{1} << 62 : static_cast<std::int64_t>(std::llround(warmup_steps));
  if (min_lr_ < 0 || min_lr_ > base_lr_) {
    throw ConfigError(fmt::format("{} must be in [0, optimizer.lr = {}]", t.where("min_lr"), base_lr_));
  }
  if (!(gamma_ > 0)) throw ConfigError(t.where("gamma") + " must be > 0");
  if (!(power_ > 0) || !std::isfinite(power_)) throw ConfigError(t.where("power") + " must be a finite number > 0");
  if (!std::is_sorted(milestones_.begin(), milestones_.end())) {
    throw ConfigError(t.where("milestones") + " must be in increasing order");
  }
}

double LrSchedule::decay_progress(std::int64_t step) const {
  const std::int64_t span = std::max<std::int64_t>(1, total_steps_ - warmup_steps_);
  return std::clamp(static_cast<double>(step - warmup_steps_) / static_cast<double>(span), 0.0, 1.0);
}

double LrSchedule::at(std::int64_t step) const {
  double lr = base_lr_;
  switch (kind_) {
    case Kind::constant: break;
    case Kind::plateau: lr *= plateau_->scale(); break;
    case Kind::cosine:
      lr = min_lr_ + (base_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * decay_progress(step)));
      break;
    case Kind::polynomial:
      lr = min_lr_ + (base_lr_ - min_lr_) * std::pow(1.0 - decay_progress(step), power_);
      break;
    case Kind::step: {
      const std::int64_t epoch = steps_per_epoch_ > 0 ? step / steps_per_epoch_ : 0;
      for (auto m : milestones_) {
        if (epoch >= m) lr *= gamma_;
      }
      break;
    }
  }
  if (step < warmup_steps_) lr *= static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  return lr;
}

std::optional<std::string> LrSchedule::end_epoch(std::int64_t epoch, const EpochMetrics& m) {
  return plateau_ ? plateau_->update(epoch, m) : std::nullopt;
}

std::string LrSchedule::describe() const {
  const std::string_view name = schedule_types()[static_cast<std::size_t>(kind_)];
  const std::string rule = plateau_                         ? " " + plateau_->describe()
                           : kind_ == Kind::polynomial ? fmt::format(" power {:g}", power_)
                                                       : "";
  return fmt::format("{}{} (warmup {} steps)", name, rule, warmup_steps_);
}

std::map<std::string, double> LrSchedule::state() const { return plateau_ ? plateau_->state() : std::map<std::string, double>{}; }

void LrSchedule::load_state(const std::map<std::string, double>& state) {
  if (plateau_) plateau_->load_state(state);
}

}  // namespace kiln::train
