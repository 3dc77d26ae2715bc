// Optional training features from their tables (see the header).
#include "kiln/train/training_features.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kiln/errors.hpp"
#include "kiln/train/checkpoint_policy.hpp"
#include "kiln/train/early_stop.hpp"
#include "kiln/train/lr_plateau.hpp"
#include "kiln/train/weight_ema.hpp"

namespace kiln::train {

void read_training_features(const FeatureTables& t, TrainerOptions& o) {
  o.clip_grad_norm = t.optimizer->get_float("clip_grad_norm");
  if (!(o.clip_grad_norm >= 0) || !std::isfinite(o.clip_grad_norm)) {
    throw ConfigError(t.optimizer->where("clip_grad_norm") + " must be a finite number > 0 (or 0 for no clipping)");
  }
  o.accumulate_steps = t.loader->get_int("accumulate_steps");
  if (o.accumulate_steps < 1) throw ConfigError(t.loader->where("accumulate_steps") + " must be at least 1");
  o.ema = ema_options(*t.ema);
  // The averaged weights' metrics exist where they are evaluated: an eval split and evaluate = true.
  const bool has_ema = o.ema && o.ema->evaluate && t.has_eval_split;
  const CheckpointPolicyOptions c = checkpoint_policy_options(*t.checkpoint, t.has_eval_split, has_ema);
  o.checkpoint_every_steps = c.every_steps;
  o.keep_best = c.keep_best;
  o.early_stop = early_stop_options(*t.early_stop, t.has_eval_split, has_ema);
  o.lr_plateau = plateau_options(t.schedule_type, *t.schedule, t.has_eval_split, has_ema);
}

void add_feature_identity(const ParamMap& loader, RunIdentity& identity) {
  const std::int64_t n = loader.get_int("accumulate_steps");
  if (n != 1) identity["loader.accumulate_steps"] = std::to_string(n);
}

}  // namespace kiln::train
