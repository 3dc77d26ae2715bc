// Learning-rate schedules (see the header for the formulas).
#include "kiln/train/lr_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kiln/errors.hpp"

namespace kiln::train {
namespace {

constexpr kiln_param_spec_v1 kScheduleSchema[] = {
    {"warmup_epochs", KILN_PARAM_FLOAT, "0.0", nullptr, "Linear warmup length in epochs (fractions allowed).", "0", nullptr},
    {"min_lr", KILN_PARAM_FLOAT, "0.0", nullptr, "cosine: the floor the rate decays to at the end of the run.", "0", nullptr},
    {"milestones", KILN_PARAM_INT_LIST, "[]", nullptr, "step: epochs at which the rate is multiplied by gamma.", "0", nullptr},
    {"gamma", KILN_PARAM_FLOAT, "0.1", nullptr, "step: factor applied at each milestone.", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
};

}  // namespace

std::span<const kiln_param_spec_v1> schedule_schema() { return kScheduleSchema; }

std::span<const std::string_view> schedule_types() {
  static constexpr std::string_view kTypes[] = {"constant", "cosine", "step"};
  return kTypes;
}

LrSchedule::LrSchedule(const std::string& type, const ParamMap& t, double base_lr,
                       std::int64_t steps_per_epoch, std::int64_t epochs)
    : base_lr_(base_lr), min_lr_(t.get_float("min_lr")), gamma_(t.get_float("gamma")),
      total_steps_(steps_per_epoch * epochs), steps_per_epoch_(steps_per_epoch),
      milestones_(t.get<std::vector<std::int64_t>>("milestones")) {
  if (type == "constant") kind_ = Kind::constant;
  else if (type == "cosine") kind_ = Kind::cosine;
  else if (type == "step") kind_ = Kind::step;
  else throw ConfigError(fmt::format("schedule.type = '{}' is not one of constant, cosine, step", type));
  const double warmup = t.get_float("warmup_epochs");
  if (warmup < 0) throw ConfigError(t.where("warmup_epochs") + " must be >= 0");
  warmup_steps_ = static_cast<std::int64_t>(std::llround(warmup * static_cast<double>(steps_per_epoch)));
  if (min_lr_ < 0 || min_lr_ > base_lr_) {
    throw ConfigError(fmt::format("{} must be in [0, optimizer.lr = {}]", t.where("min_lr"), base_lr_));
  }
  if (!(gamma_ > 0)) throw ConfigError(t.where("gamma") + " must be > 0");
  if (!std::is_sorted(milestones_.begin(), milestones_.end())) {
    throw ConfigError(t.where("milestones") + " must be in increasing order");
  }
}

double LrSchedule::at(std::int64_t step) const {
  double lr = base_lr_;
  switch (kind_) {
    case Kind::constant: break;
    case Kind::cosine: {
      const std::int64_t span = std::max<std::int64_t>(1, total_steps_ - warmup_steps_);
      const double t = std::clamp(static_cast<double>(step - warmup_steps_) / static_cast<double>(span), 0.0, 1.0);
      lr = min_lr_ + (base_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * t));
      break;
    }
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

std::string LrSchedule::describe() const {
  const char* name = kind_ == Kind::constant ? "constant" : kind_ == Kind::cosine ? "cosine" : "step";
  return fmt::format("{} (warmup {} steps)", name, warmup_steps_);
}

}  // namespace kiln::train
