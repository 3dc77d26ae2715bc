// Learning-rate schedules, evaluated per optimizer step.
//
//   constant - lr
//   cosine   - min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2, t = (step - warmup) / (total - warmup)
//              clamped to [0, 1], so min_lr is the rate one step past the last (as PyTorch)
//   step     - lr * gamma^(number of milestones (in epochs) already passed)
//   plateau  - lr times what the plateau rule has made of it so far (lr_plateau.hpp): the one
//              schedule that follows a metric, so end_epoch() feeds it each epoch's numbers
//   polynomial - min_lr + (lr - min_lr) * (1 - t)^power, t as for cosine: power 1 is the linear
//              decay of Hugging Face's default schedule (get_linear_schedule_with_warmup), and the
//              whole is TF's PolynomialDecay and PyTorch's PolynomialLR (with an end rate)
// Any of them may start with a linear warmup over `warmup_epochs` (fractional allowed) from
// lr / (warmup steps) up to the schedule's value, as in Goyal et al. (arXiv:1706.02677).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/train/lr_plateau.hpp"

namespace kiln::train {

/// The [schedule] types: "constant", "cosine", "step", "plateau" (for Config::plugin_type's check).
std::span<const std::string_view> schedule_types();
/// Keys of the [schedule] table for `type` (one of schedule_types()): warmup_epochs, and each
/// type's own. Throws ConfigError for another type.
std::span<const kiln_param_spec_v1> schedule_schema(const std::string& type);
/// The keys other types take and `type` does not (for Config::drop_defaults: config.toml of runs
/// before each type had its own keys lists min_lr, milestones and gamma under every type).
std::vector<kiln_param_spec_v1> schedule_keys_of_other_types(const std::string& type);

class LrSchedule {
 public:
  enum class Kind : std::uint8_t { constant, cosine, step, plateau, polynomial };  // schedule_types()'s order
  /// `table` was validated against schedule_schema(type); `plateau` is plateau_options() of it:
  /// required for type "plateau", ignored otherwise. Throws ConfigError for a bad type, negative
  /// warmup, min_lr above the rate, milestones out of order.
  LrSchedule(const std::string& type, const ParamMap& table, double base_lr, std::int64_t steps_per_epoch,
             std::int64_t epochs, std::optional<PlateauOptions> plateau = std::nullopt);
  /// Learning rate for optimizer step `step` (0-based, counted over the whole run).
  double at(std::int64_t step) const;
  /// After epoch `epoch` (0-based) with its reduced metrics: the plateau schedule decides whether
  /// to lower the rate and returns a line saying so when it did; the others return nullopt.
  std::optional<std::string> end_epoch(std::int64_t epoch, const EpochMetrics& m);
  std::string describe() const;

  /// What a checkpoint keeps of the schedule (the plateau's state; empty for the others, which
  /// depend on the step alone).
  std::map<std::string, double> state() const;
  /// Throws DataError for a state no schedule could have written.
  void load_state(const std::map<std::string, double>& state);
  /// The plateau rule, for "plateau"; null otherwise.
  const LrPlateau* plateau() const { return plateau_ ? &*plateau_ : nullptr; }

 private:
  /// The decaying schedules' t: 0 until the warmup ends, 1 at the step one past the last.
  double decay_progress(std::int64_t step) const;

  Kind kind_;
  double base_lr_, min_lr_, gamma_, power_;
  std::int64_t warmup_steps_, total_steps_, steps_per_epoch_;
  std::vector<std::int64_t> milestones_;  // in epochs
  std::optional<LrPlateau> plateau_;
};

}  // namespace kiln::train
