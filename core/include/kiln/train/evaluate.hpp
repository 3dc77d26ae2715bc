// One pass over an evaluation loader in Mode::eval: the loop the trainer runs after each epoch,
// shared with `kiln eval` and `kiln predict` so that they compute exactly what a run reported.
//
// The precision policy's before_forward runs first: under bf16/fp16 the model computes from
// compute-dtype copies of the master weights, which must be refreshed from the weights being
// evaluated (the last optimizer step, or a checkpoint just loaded); under fp32 it does nothing.
// Only the first valid_rows of each batch count (pad policy). Sums are this rank's; the caller
// reduces them over ranks. Errors propagate from the backend, model and loader unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "kiln/backend.hpp"
#include "kiln/data/data_loader.hpp"
#include "kiln/model.hpp"
#include "kiln/precision_policy.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/train/compute_boundary.hpp"
#include "kiln/train/top_k_counter.hpp"

namespace kiln::train {

/// This rank's sums over one evaluation pass.
struct EvalSums {
  double loss_sum = 0, correct = 0, samples = 0;
  std::optional<double> top_k_hits;  ///< with a TopKCounter in EvalParts
  double loss() const { return samples > 0 ? loss_sum / samples : 0.0; }
  double accuracy() const { return samples > 0 ? correct / samples : 0.0; }
  std::optional<double> top_k_accuracy() const {
    if (!top_k_hits) return std::nullopt;
    return samples > 0 ? *top_k_hits / samples : 0.0;
  }
};

/// Called per batch with its labels (rows, i32) and f32 logits (rows x classes), both in the
/// backend's memory; only the first batch.valid_rows rows are samples. The batch's own host
/// tensors must not be read: the loader may already be refilling that staging slot.
using LogitsCallback = std::function<void(const data::Batch& batch, const Tensor& labels, const Tensor& logits)>;

/// What one pass uses; all built by the caller for at least the loader's batch.
struct EvalParts {
  Backend* backend = nullptr;
  Model* model = nullptr;
  PrecisionPolicy* precision = nullptr;
  data::DataLoader* loader = nullptr;
  nn::SoftmaxCrossEntropy* loss = nullptr;
  ComputeBoundary* boundary = nullptr;
  /// Called after each batch, empty ones included (a progress display); may be empty.
  std::function<void(const data::Batch& batch)> after_batch;
  /// Counts the top-k hits as well when set (reset at the start of the pass); may be null.
  TopKCounter* top_k = nullptr;
  /// Stop after this many loader steps (`kiln train --dry-run`); 0 = the whole split.
  std::int64_t max_batches = 0;
};

/// Runs `epoch` of the loader (its order; unshuffled eval loaders ignore the epoch).
EvalSums evaluate_pass(const EvalParts& parts, std::int64_t epoch, const LogitsCallback& on_logits = {});

}  // namespace kiln::train
