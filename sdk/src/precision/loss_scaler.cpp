// The loss-scale state machine (loss_scaler.hpp). Scales are doubles so that the powers of two
// the default factors produce are exact; the floor check happens before the scale changes, so
// a run that stops leaves the last usable scale in its state.
#include "kiln/sdk/loss_scaler.hpp"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string_view>

#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"

namespace kiln::sdk {
namespace {

using WhereFn = std::function<std::string(std::string_view key)>;

void require(bool ok, const WhereFn& where, std::string_view key, double value, std::string_view rule) {
  if (!ok) {
    throw ConfigError(fmt::format("{} = {} {}; fix the [precision] table", where(key), value, rule));
  }
}

void check_options(const LossScalerOptions& o, const WhereFn& where) {
  require(std::isfinite(o.min_scale) && o.min_scale > 0, where, "min_scale", o.min_scale,
          "must be a finite number > 0");
  require(std::isfinite(o.max_scale) && o.max_scale >= o.min_scale, where, "max_scale", o.max_scale,
          fmt::format("must be finite and >= min_scale ({})", o.min_scale));
  require(std::isfinite(o.initial_scale) && o.initial_scale >= o.min_scale && o.initial_scale <= o.max_scale,
          where, "initial_scale", o.initial_scale,
          fmt::format("must lie in [min_scale, max_scale] = [{}, {}]", o.min_scale, o.max_scale));
  require(o.growth_interval >= 1, where, "growth_interval", static_cast<double>(o.growth_interval),
          "must be >= 1");
  require(std::isfinite(o.growth_factor) && o.growth_factor > 1, where, "growth_factor", o.growth_factor,
          "must be > 1");
  require(o.backoff_factor > 0 && o.backoff_factor < 1, where, "backoff_factor", o.backoff_factor,
          "must lie in (0, 1)");
}

}  // namespace

LossScalerOptions loss_scaler_options(const ParamMap& params) {
  LossScalerOptions o;
  o.initial_scale = params.get_float("initial_scale");
  o.growth_interval = params.get_int("growth_interval");
  o.growth_factor = params.get_float("growth_factor");
  o.backoff_factor = params.get_float("backoff_factor");
  o.min_scale = params.get_float("min_scale");
  o.max_scale = params.get_float("max_scale");
  o.mode = params.get_bool("dynamic") ? ScaleMode::dynamic : ScaleMode::fixed;
  check_options(o, [&](std::string_view key) { return params.where(key); });
  // Allowed (a model whose f16 gradients overflow even unscaled), but a scale under 1 shrinks
  // gradients, and f16 flushes those below 6e-8 to 0: steps then change nothing, and none is
  // skipped, so nothing else would say so.
  for (const char* key : {"initial_scale", "min_scale"}) {
    const double scale = params.get_float(key);
    if (scale < 1.0 && (o.mode == ScaleMode::dynamic || std::string_view(key) == "initial_scale")) {
      log::get("precision")->warn("{} = {} is below 1: the loss scale shrinks the f16 gradients, and those below 6e-8 "
                                  "become 0 (a step that changes nothing is not skipped, so no other line says so); "
                                  "a scale of 1 or more never makes that worse",
                                  params.where(key), scale);
    }
  }
  return o;
}

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.initial_scale) {
  check_options(options_, [](std::string_view key) { return fmt::format("loss scaler option {}", key); });
}

StepDecision LossScaler::update(GradStatus status) {
  const std::int64_t step = steps_;
  if (status == GradStatus::finite) {
    ++steps_;
    consecutive_skips_ = 0;
    if (options_.mode == ScaleMode::fixed) return StepDecision::apply;
    if (++good_steps_ >= options_.growth_interval) {
      scale_ = std::min(scale_ * options_.growth_factor, options_.max_scale);
      good_steps_ = 0;
    }
    return StepDecision::apply;
  }
  if (options_.mode == ScaleMode::fixed) {
    throw NumericError(fmt::format(
        "gradients are not finite (inf or NaN) at step {} with the static loss scale {}; "
        "lower precision.initial_scale or set precision.dynamic = true",
        step, scale_));
  }
  const double next = scale_ * options_.backoff_factor;
  if (next < options_.min_scale) {
    throw NumericError(fmt::format(
        "loss scale fell below the floor {} after {} consecutive overflows at step {}; "
        "the model diverged or the data contain inf/NaN",
        options_.min_scale, consecutive_skips_ + 1, step));
  }
  ++steps_;
  scale_ = next;
  good_steps_ = 0;
  ++skipped_steps_;
  ++consecutive_skips_;
  return StepDecision::skip;
}

std::map<std::string, double> LossScaler::metrics() const {
  return {{"loss_scale", scale_}, {"skipped_steps", static_cast<double>(skipped_steps_)}};
}

std::map<std::string, double> LossScaler::state() const {
  return {{"scale", scale_},
          {"good_steps", static_cast<double>(good_steps_)},
          {"skipped_steps", static_cast<double>(skipped_steps_)},
          {"consecutive_skips", static_cast<double>(consecutive_skips_)},
          {"steps", static_cast<double>(steps_)}};
}

void LossScaler::load_state(const std::map<std::string, double>& state) {
  // A checkpoint of an fp32/bf16 run carries no precision state: switching to fp16 on resume
  // starts the schedule afresh, as a new run would.
  if (state.empty()) return;
  static constexpr const char* kKeys[] = {"scale", "good_steps", "skipped_steps", "consecutive_skips", "steps"};
  for (const auto& [key, value] : state) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      throw DataError(fmt::format("loss scaler state has an unknown key '{}' (= {}); expected scale, good_steps, "
                                  "skipped_steps, consecutive_skips, steps; the checkpoint was written by "
                                  "another precision policy",
                                  key, value));
    }
  }
  auto get = [&](const char* key) {
    const auto it = state.find(key);
    if (it == state.end()) {
      throw DataError(fmt::format("loss scaler state lacks '{}'; the checkpoint was written by another "
                                  "precision policy or is damaged",
                                  key));
    }
    return it->second;
  };
  auto count = [&](const char* key) {
    const double v = get(key);
    if (!(v >= 0) || v != std::floor(v) || v > 9.0e15) {
      throw DataError(fmt::format("loss scaler state '{}' = {} is not a non-negative integer; the "
                                  "checkpoint is damaged",
                                  key, v));
    }
    return static_cast<std::int64_t>(v);
  };
  const double scale = get("scale");
  if (!std::isfinite(scale) || scale < options_.min_scale || scale > options_.max_scale) {
    throw DataError(fmt::format("loss scaler state 'scale' = {} lies outside [min_scale, max_scale] = [{}, {}]; "
                                "the checkpoint is damaged or the configured bounds changed",
                                scale, options_.min_scale, options_.max_scale));
  }
  const std::int64_t good = count("good_steps");
  const std::int64_t skipped = count("skipped_steps");
  const std::int64_t consecutive = count("consecutive_skips");
  const std::int64_t steps = count("steps");
  if (skipped > steps || consecutive > skipped) {
    throw DataError(fmt::format("loss scaler state is inconsistent: steps {}, skipped_steps {}, consecutive_skips {}; "
                                "the checkpoint is damaged",
                                steps, skipped, consecutive));
  }
  if (options_.mode == ScaleMode::dynamic) scale_ = scale;
  good_steps_ = good;
  skipped_steps_ = skipped;
  consecutive_skips_ = consecutive;
  steps_ = steps;
}

}  // namespace kiln::sdk
