// An exponential moving average of the model's weights ([ema]), as Keras' `use_ema`, timm's
// ModelEma and torchvision's reference recipes (`--model-ema`) keep one: after every
// `every_steps` optimizer steps,
//
//     average = decay * average + (1 - decay) * weight
//
// (with `warmup`, update n uses min(decay, (1 + n) / (10 + n)) instead, as TensorFlow's
// tf.train.ExponentialMovingAverage does when given num_updates: 0.18 for the first update,
// 0.5 by the eighth, so an average of 0.9999 is not stuck near the random start for its first
// ten thousand steps)
// for every parameter's master value and every f32 buffer (batch-norm running statistics, as
// torchvision's ExponentialMovingAverage with use_buffers=True); a buffer of another dtype is
// copied. The average starts at the weights the run starts from (after [model] init and rank 0's
// broadcast), and a skipped step (fp16 overflow) still folds the unchanged weights in, so the
// averages depend only on the global step, which a resumed run restores.
//
// The averages mirror the model's storage: each parameter (and buffer) storage gets an arena of
// the same extent, each tensor's average sits at its own byte offset there, and one
// Backend::lerp covers each run of consecutive tensors in one storage (the gaps between
// parameters are zero on both sides and stay zero), as the optimizer's segments do.
//
// Every rank keeps its own averages: the parameters are equal on every rank, so theirs are; the
// buffers are not (each rank's statistics come from its own batches), and as for the model's own
// buffers rank 0's are the ones that count: they are what a checkpoint saves, and the trainer
// broadcasts them before evaluating the averaged weights (AveragedWeightsInModel, then BufferSync).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::train {

/// Keys of the [ema] table: decay (0 = off), every_steps, warmup, evaluate.
std::span<const kiln_param_spec_v1> ema_schema();

struct EmaOptions {
  double decay = 0;              ///< in (0, 1)
  std::int64_t every_steps = 1;  ///< fold the weights in after every this many optimizer steps
  bool warmup = false;           ///< shorter averages at first (ema_decay_at)
  bool evaluate = true;          ///< evaluate the averaged weights after each epoch too
};

/// Reads the validated [ema] table; nullopt when decay is 0 (off). Throws ConfigError for a key
/// that is set while the average is off (keys_without_effect.hpp) and for a decay outside [0, 1).
std::optional<EmaOptions> ema_options(const ParamMap& table);

/// The decay of update number `update` (1 for the first): options.decay, or with warmup
/// min(decay, (1 + update) / (10 + update)). A function of the global step alone, so a resumed run
/// continues with the decay the uninterrupted one would use.
double ema_decay_at(const EmaOptions& options, std::int64_t update);

/// A tensor of the model's state and the tensor that holds its average, under the model's name.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class WeightEma {
 public:
  /// Allocates the averages (zero-filled) on `backend` and starts them at the model's current
  /// weights. Throws UnsupportedError when the backend has no f32 lerp.
  WeightEma(Backend& backend, std::span<const Parameter> params, std::span<const ModelBuffer> buffers,
            EmaOptions options);

  /// Starts the averages again at the model's current weights.
  void reset();
  /// Called after each optimizer step with the number of steps done so far; folds the weights in
  /// when that number is a multiple of every_steps.
  void after_step(std::int64_t global_step);

  /// Every parameter's and buffer's average, named as the model names the tensor (the names of
  /// model.safetensors), in parameters-then-buffers order.
  const NamedTensors& averages() const { return averages_; }
  /// The model's own tensors, in the same order as averages().
  const NamedTensors& weights() const { return weights_; }
  const EmaOptions& options() const { return options_; }
  /// "decay 0.999 every 1 step over 25.6M values in 3 runs".
  std::string describe() const;

 private:
  /// A run of consecutive tensors in one storage: the model's slice and its average's slice.
  struct Run {
    Tensor weight, average;
    bool averaged = true;  ///< f32: lerp; other dtypes: copied
  };

  Backend* backend_;
  EmaOptions options_;
  NamedTensors weights_, averages_;
  std::vector<Run> runs_;
  std::int64_t values_ = 0;
};

/// While alive, the model holds the averaged weights: the constructor copies the model's weights
/// aside (into a scratch copy allocated on first use and kept for the next swap) and the
/// averages in; restore() (or, failing that, the destructor) copies the model's weights back,
/// buffers included, so each rank continues with its own statistics. The precision policy's
/// compute copies are refreshed by the evaluation pass (evaluate.hpp), and the next training
/// step refreshes them from the restored master weights.
class AveragedWeightsInModel {
 public:
  AveragedWeightsInModel(Backend& backend, const WeightEma& ema, std::vector<Tensor>& scratch);
  ~AveragedWeightsInModel();
  AveragedWeightsInModel(const AveragedWeightsInModel&) = delete;
  AveragedWeightsInModel& operator=(const AveragedWeightsInModel&) = delete;
  /// Puts the model's own weights back (once).
  void restore();

 private:
  Backend& backend_;
  const WeightEma& ema_;
  std::vector<Tensor>& scratch_;
  bool restored_ = false;
};

}  // namespace kiln::train
