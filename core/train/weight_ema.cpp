// The moving average of the weights (see the header).
#include "kiln/train/weight_ema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kiln/errors.hpp"
#include "kiln/io/progress_format.hpp"
#include "kiln/train/keys_without_effect.hpp"

namespace kiln::train {
namespace {

constexpr kiln_param_spec_v1 kEma[] = {
    {"decay", KILN_PARAM_FLOAT, "0.0", nullptr,
     "Keep an exponential moving average of the weights and batch-norm statistics: after every every_steps "
     "optimizer steps, average = decay * average + (1 - decay) * weight (Keras' ema_momentum, timm's "
     "model_ema_decay); 0 = off. Written as model_ema.safetensors in every checkpoint.",
     "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"every_steps", KILN_PARAM_INT, "1", nullptr,
     "Optimizer steps between two updates of the average (torchvision's --model-ema-steps).", "1", nullptr},
    {"warmup", KILN_PARAM_BOOL, "false", nullptr,
     "Start with shorter averages, as tf.train.ExponentialMovingAverage with num_updates: update n uses "
     "min(decay, (1 + n) / (10 + n)), so the early average follows the weights instead of staying near the random "
     "start."},
    {"evaluate", KILN_PARAM_BOOL, "true", nullptr,
     "Also evaluate the averaged weights after each epoch ([data.eval]): \"test_ema\" records and eval_ema_* "
     "metrics for early_stop, keep_best and the plateau schedule; false = only model_ema.safetensors."},
};

/// A byte count in f32 elements, rounded up: the unit the mirror arenas are allocated in.
std::int64_t f32_elements(std::size_t bytes) { return static_cast<std::int64_t>((bytes + 3) / 4); }

}  // namespace

std::span<const kiln_param_spec_v1> ema_schema() { return kEma; }

std::optional<EmaOptions> ema_options(const ParamMap& t) {
  const double decay = t.get_float("decay");
  if (decay == 0.0) {
    refuse_keys_without_effect(t, kEma, {"every_steps", "warmup", "evaluate"},
                               "the moving average is off (ema.decay is 0); set ema.decay (0.999 or 0.9999 are usual) "
                               "to keep one, or remove the key");
    return std::nullopt;
  }
  // The schema's range already refuses these; a table built by code may not have passed it.
  if (!(decay > 0.0 && decay < 1.0)) throw ConfigError(fmt::format("{} must be in [0, 1), got {}", t.where("decay"), decay));
  EmaOptions o;
  o.decay = decay;
  o.every_steps = t.get_int("every_steps");
  if (o.every_steps < 1) throw ConfigError(t.where("every_steps") + " must be at least 1");
  o.warmup = t.get_bool("warmup");
  o.evaluate = t.get_bool("evaluate");
  return o;
}

double ema_decay_at(const EmaOptions& o, std::int64_t update) {
  if (!o.warmup) return o.decay;
  const auto n = static_cast<double>(update);
  return std::min(o.decay, (1.0 + n) / (10.0 + n));
}

WeightEma::WeightEma(Backend& backend, std::span<const Parameter> params, std::span<const ModelBuffer> buffers,
                     EmaOptions options)
    : backend_(&backend), options_(options) {
  if (!backend.supports(Op::lerp, DType::f32)) {
    throw UnsupportedError(fmt::format("[ema] needs the backend op lerp in f32, and backend '{}' does not implement "
                                       "it; set ema.decay = 0",
                                       backend.name()));
  }
  for (const Parameter& p : params) weights_.emplace_back(p.name, p.value);
  for (const ModelBuffer& b : buffers) weights_.emplace_back(b.name, b.value);

  // One zero-filled arena per storage, as long as the furthest tensor in it reaches.
  std::map<const Storage*, std::size_t> extent;
  for (const auto& [name, w] : weights_) {
    std::size_t& e = extent[w.storage().get()];
    e = std::max(e, w.offset_bytes() + w.bytes());
  }
  std::map<const Storage*, Tensor> arena;
  for (const auto& [storage, bytes] : extent) {
    Tensor a = backend.allocate({f32_elements(bytes)}, DType::f32, MemoryKind::device);
    backend.fill(a, 0.0);
    arena.emplace(storage, std::move(a));
  }
  for (const auto& [name, w] : weights_) {
    averages_.emplace_back(name, Tensor(arena.at(w.storage().get()).storage(), w.shape(), w.dtype(), w.offset_bytes(),
                                        w.layout()));
    values_ += w.numel();
  }

  // Runs: tensors that follow each other without a gap in one storage, of one dtype. Only exact
  // neighbours are joined, so a run never covers bytes that belong to no tensor named here.
  std::size_t i = 0;
  while (i < weights_.size()) {
    const Tensor& first = weights_[i].second;
    std::size_t j = i + 1;
    std::size_t end = first.offset_bytes() + first.bytes();
    while (j < weights_.size()) {
      const Tensor& next = weights_[j].second;
      if (next.storage() != first.storage() || next.dtype() != first.dtype() || next.offset_bytes() != end) break;
      end += next.bytes();
      ++j;
    }
    const std::int64_t elems = static_cast<std::int64_t>((end - first.offset_bytes()) / dtype_size(first.dtype()));
    Run r;
    r.weight = Tensor(first.storage(), {elems}, first.dtype(), first.offset_bytes());
    r.average = Tensor(averages_[i].second.storage(), {elems}, first.dtype(), first.offset_bytes());
    r.averaged = first.dtype() == DType::f32;
    runs_.push_back(std::move(r));
    i = j;
  }
  reset();
}

void WeightEma::reset() {
  for (const Run& r : runs_) backend_->copy(r.weight, r.average);
}

void WeightEma::after_step(std::int64_t global_step) {
  if (global_step % options_.every_steps != 0) return;
  const auto weight = static_cast<float>(1.0 - ema_decay_at(options_, global_step / options_.every_steps));
  for (const Run& r : runs_) {
    if (r.averaged) {
      backend_->lerp(r.average, r.weight, weight);
    } else {
      backend_->copy(r.weight, r.average);
    }
  }
}

std::string WeightEma::describe() const {
  return fmt::format("decay {}{} every {} step{}, {} values in {} run{}{}", options_.decay,
                     options_.warmup ? " (after a warmup)" : "", options_.every_steps,
                     options_.every_steps == 1 ? "" : "s", io::format_si(static_cast<double>(values_)), runs_.size(),
                     runs_.size() == 1 ? "" : "s", options_.evaluate ? "; evaluated after each epoch" : "");
}

AveragedWeightsInModel::AveragedWeightsInModel(Backend& backend, const WeightEma& ema, std::vector<Tensor>& scratch)
    : backend_(backend), ema_(ema), scratch_(scratch) {
  const NamedTensors& weights = ema.weights();
  const NamedTensors& averages = ema.averages();
  if (scratch_.size() != weights.size()) {
    scratch_.clear();
    for (const auto& [name, w] : weights) {
      scratch_.push_back(backend.allocate(w.shape(), w.dtype(), MemoryKind::device).with_layout(w.layout()));
    }
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    backend.copy(weights[i].second, scratch_[i]);
    backend.copy(averages[i].second, weights[i].second);
  }
}

void AveragedWeightsInModel::restore() {
  if (restored_) return;
  restored_ = true;
  const NamedTensors& weights = ema_.weights();
  for (std::size_t i = 0; i < weights.size(); ++i) backend_.copy(scratch_[i], weights[i].second);
}

AveragedWeightsInModel::~AveragedWeightsInModel() {
  // Only reached unrestored while an exception ends the run: a second failure must not terminate.
  try {
    restore();
  } catch (...) {
  }
}

}  // namespace kiln::train
