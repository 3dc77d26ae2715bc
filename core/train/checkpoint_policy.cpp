// When to write checkpoints and which to keep as the best (see the header).
#include "kiln/train/checkpoint_policy.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/keys_without_effect.hpp"

namespace kiln::train {

CheckpointPolicyOptions checkpoint_policy_options(const ParamMap& t, bool has_eval_split, bool has_ema) {
  CheckpointPolicyOptions o;
  o.every_epochs = t.get_int("every_epochs");
  o.every_steps = t.get_int("every_steps");
  o.keep = t.get_int("keep");
  if (o.every_epochs < 0) throw ConfigError(t.where("every_epochs") + " must be >= 0");
  if (o.every_steps < 0) throw ConfigError(t.where("every_steps") + " must be >= 0");
  if (o.keep < 1) throw ConfigError(t.where("keep") + " must be at least 1");
  if (const std::string name = t.get_string("keep_best"); !name.empty()) {
    o.keep_best =
        parse_watched_metric(name, t.where("keep_best"), t.get_string("keep_best_mode"), has_eval_split, has_ema);
  } else {
    refuse_keys_without_effect(t, checkpoint_schema(), {"keep_best_mode"},
                               "no best checkpoint is kept (checkpoint.keep_best is \"\"); set checkpoint.keep_best to "
                               "the metric to judge by, or remove the key");
  }
  return o;
}

CheckpointPolicy::CheckpointPolicy(CheckpointPolicyOptions options, std::filesystem::path checkpoint_dir)
    : opt_(std::move(options)), dir_(std::move(checkpoint_dir)) {
  if (opt_.keep_best) load_existing_best();
}

bool CheckpointPolicy::step_checkpoint_due(std::int64_t global_step, bool last_step_of_epoch) {
  if (opt_.every_steps <= 0 || global_step % opt_.every_steps != 0) return false;
  if (last_step_of_epoch) {
    step_fell_on_epoch_end_ = true;  // written after the epoch's evaluation, as the epoch's checkpoint
    return false;
  }
  return true;
}

bool CheckpointPolicy::epoch_checkpoint_due(std::int64_t epoch, bool last, bool forced) {
  const bool step = step_fell_on_epoch_end_;
  step_fell_on_epoch_end_ = false;
  if (forced || step) return true;
  // The last epoch closes the run with a checkpoint whenever checkpoints are on at all.
  if (last) return opt_.every_epochs > 0 || opt_.every_steps > 0;
  return opt_.every_epochs > 0 && (epoch + 1) % opt_.every_epochs == 0;
}

bool CheckpointPolicy::offer_best(const EpochMetrics& m) {
  if (!opt_.keep_best) return false;
  const double v = opt_.keep_best->of(m);
  if (std::isnan(v)) return false;
  if (best_ && !opt_.keep_best->improves(v, *best_, 0.0)) return false;
  best_ = v;
  return true;
}

std::map<std::string, std::string> CheckpointPolicy::best_metadata(std::int64_t epoch) const {
  return {{"best.metric", opt_.keep_best->name},
          {"best.mode", opt_.keep_best->goal_name()},
          {"best.value", fmt::format("{}", best_.value_or(0.0))},
          {"best.epoch", std::to_string(epoch + 1)}};
}

void CheckpointPolicy::load_existing_best() {
  const std::filesystem::path dir = best_dir();
  if (!std::filesystem::exists(dir / "trainer.safetensors")) return;
  auto log = log::get("train");
  std::map<std::string, std::string> meta;
  try {
    meta = checkpoint_metadata(dir);
  } catch (const Error& e) {
    log->warn("keep_best: {} is unreadable ({}); the next best epoch replaces it", dir.string(), e.what());
    return;
  }
  const auto metric = meta.find("best.metric"), mode = meta.find("best.mode"), value = meta.find("best.value");
  if (metric == meta.end() || mode == meta.end() || value == meta.end() || metric->second != opt_.keep_best->name ||
      mode->second != opt_.keep_best->goal_name()) {
    log->warn("keep_best: {} was kept for another metric or mode; the next epoch replaces it", dir.string());
    return;
  }
  double v = 0;
  const auto r = std::from_chars(value->second.data(), value->second.data() + value->second.size(), v);
  if (r.ec != std::errc() || !std::isfinite(v)) {
    log->warn("keep_best: {} records best.value '{}', not a number; the next epoch replaces it", dir.string(),
              value->second);
    return;
  }
  best_ = v;
  log->info("keep_best: {} holds {} = {} (epoch {})", dir.string(), metric->second, v,
            meta.count("best.epoch") ? meta.at("best.epoch") : "?");
}

}  // namespace kiln::train
