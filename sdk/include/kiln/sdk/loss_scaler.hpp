// LossScaler: the dynamic loss-scale state machine of fp16 training, as plain C++ with no
// backend, so the `fp16` precision plugin and a device backend (CUDA) share one set of rules.
//
// Rules (PyTorch GradScaler's, plus a floor): a step whose reduced gradients are not finite is
// skipped and the scale is multiplied by backoff_factor; after growth_interval consecutive
// finite steps the scale is multiplied by growth_factor, capped at max_scale. A backoff that
// would take the scale below min_scale stops the run with NumericError (the model diverged or
// the data contain inf/NaN: shrinking further would only hide it). With ScaleMode::fixed the
// scale never changes and the first non-finite step is a NumericError.
// Not thread-safe: one trainer thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "kiln/params.hpp"
#include "kiln/precision_policy.hpp"

namespace kiln::sdk {

enum class ScaleMode : std::uint8_t { dynamic = 0, fixed = 1 };
/// What the finite check of one step's reduced gradients found.
enum class GradStatus : std::uint8_t { finite = 0, non_finite = 1 };

struct LossScalerOptions {
  double initial_scale = 65536.0;  // 2^16
  std::int64_t growth_interval = 2000;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  double min_scale = 1.0;
  double max_scale = 16777216.0;  // 2^24
  ScaleMode mode = ScaleMode::dynamic;
};

/// Options from a [precision] table with the keys initial_scale, growth_interval, growth_factor,
/// backoff_factor, min_scale, max_scale, dynamic. Throws ConfigError naming the key and its
/// origin ("precision.growth_factor = 1 (run.toml:4) must be > 1; ...").
LossScalerOptions loss_scaler_options(const ParamMap& params);

class LossScaler {
 public:
  /// Throws ConfigError if the options are inconsistent (see loss_scaler_options).
  explicit LossScaler(LossScalerOptions options = {});

  /// The factor the loss gradient is multiplied by now.
  double scale() const noexcept { return scale_; }
  /// Records one step's outcome and says whether to apply it. Throws NumericError when a
  /// backoff would fall below min_scale, or on any overflow in ScaleMode::fixed.
  StepDecision update(GradStatus status);

  /// Steps seen (applied + skipped); the trainer's global step when state is restored.
  std::int64_t steps() const noexcept { return steps_; }
  /// Consecutive finite steps since the scale last changed.
  std::int64_t good_steps() const noexcept { return good_steps_; }
  /// Skipped steps in total, and in a row right now.
  std::int64_t skipped_steps() const noexcept { return skipped_steps_; }
  std::int64_t consecutive_skips() const noexcept { return consecutive_skips_; }
  const LossScalerOptions& options() const noexcept { return options_; }

  /// {"loss_scale", "skipped_steps"} for metrics.jsonl (skipped_steps counts the whole run).
  std::map<std::string, double> metrics() const;
  /// {"scale", "good_steps", "skipped_steps", "consecutive_skips", "steps"} for checkpoints.
  std::map<std::string, double> state() const;
  /// Inverse of state(). An empty map (a checkpoint of a policy without state) changes nothing.
  /// Throws DataError naming a missing, unknown or impossible key. In
  /// ScaleMode::fixed the configured scale wins over the saved one (the user may change it on
  /// resume); the counters are restored either way.
  void load_state(const std::map<std::string, double>& state);

 private:
  LossScalerOptions options_;
  double scale_;
  std::int64_t steps_ = 0;
  std::int64_t good_steps_ = 0;
  std::int64_t skipped_steps_ = 0;
  std::int64_t consecutive_skips_ = 0;
};

}  // namespace kiln::sdk
