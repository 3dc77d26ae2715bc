// Reading the optional training features (gradient clipping, accumulation, step checkpoints,
// keep-best, early stopping, the plateau schedule's rule, the weights' moving average) from their
// validated tables into TrainerOptions, so that run.cpp wires them with one call. Every bad value
// is a ConfigError naming where it was set, raised before the run directory exists.
#pragma once

#include "kiln/params.hpp"
#include "kiln/train/run_identity.hpp"
#include "kiln/train/trainer.hpp"

namespace kiln::train {

struct FeatureTables {
  const ParamMap* optimizer = nullptr;   ///< clip_grad_norm
  const ParamMap* loader = nullptr;      ///< accumulate_steps
  const ParamMap* checkpoint = nullptr;  ///< every_steps, keep_best, keep_best_mode
  const ParamMap* early_stop = nullptr;  ///< the [early_stop] table
  const ParamMap* schedule = nullptr;    ///< the [schedule] table
  const ParamMap* ema = nullptr;         ///< the [ema] table
  std::string schedule_type;             ///< its type (lr_plateau.hpp for "plateau")
  bool has_eval_split = false;
};

/// Sets clip_grad_norm, accumulate_steps, checkpoint_every_steps, keep_best, early_stop,
/// lr_plateau and ema.
void read_training_features(const FeatureTables& tables, TrainerOptions& options);

/// What of these features belongs to the run's identity (run_identity.hpp): accumulate_steps,
/// which changes what a step is, when it is not 1 (so checkpoints of runs without it still match).
void add_feature_identity(const ParamMap& loader, RunIdentity& identity);

}  // namespace kiln::train
