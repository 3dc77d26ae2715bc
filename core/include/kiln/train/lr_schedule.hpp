// Learning-rate schedules, evaluated per optimizer step.
//
//   constant - lr
//   cosine   - min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2, t = (step - warmup) / (total - warmup)
//              clamped to [0, 1], so min_lr is the rate one step past the last (as PyTorch)
//   step     - lr * gamma^(number of milestones (in epochs) already passed)
// Any of them may start with a linear warmup over `warmup_epochs` (fractional allowed) from
// lr / (warmup steps) up to the schedule's value, as in Goyal et al. (arXiv:1706.02677).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::train {

/// The [schedule] types: "constant", "cosine", "step" (for Config::plugin_type's check).
std::span<const std::string_view> schedule_types();
/// Keys of the [schedule] table (besides `type`, one of schedule_types()).
std::span<const kiln_param_spec_v1> schedule_schema();

class LrSchedule {
 public:
  enum class Kind : std::uint8_t { constant, cosine, step };
  /// Throws ConfigError for a bad type, negative warmup, milestones out of order.
  LrSchedule(const std::string& type, const ParamMap& table, double base_lr, std::int64_t steps_per_epoch,
             std::int64_t epochs);
  /// Learning rate for optimizer step `step` (0-based, counted over the whole run).
  double at(std::int64_t step) const;
  std::string describe() const;

 private:
  Kind kind_;
  double base_lr_, min_lr_, gamma_;
  std::int64_t warmup_steps_, total_steps_, steps_per_epoch_;
  std::vector<std::int64_t> milestones_;  // in epochs
};

}  // namespace kiln::train
