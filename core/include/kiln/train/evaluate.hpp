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

#include "kiln/backend.hpp"
#include "kiln/data/data_loader.hpp"
#include "kiln/model.hpp"
#include "kiln/precision_policy.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/train/compute_boundary.hpp"

namespace kiln::train {

/// The k of the top-k accuracy `kiln eval` reports besides top-1 (ImageNet's Acc@5), for a model
/// of more than kTopK classes.
inline constexpr std::int64_t kTopK = 5;

/// This rank's sums over one evaluation pass.
struct EvalSums {
  double loss_sum = 0, correct = 0, samples = 0;
  double loss() const { return samples > 0 ? loss_sum / samples : 0.0; }
  double accuracy() const { return samples > 0 ? correct / samples : 0.0; }
};

/// How many of `rows` samples have their label among the `k` highest of their `classes` logits
/// (row-major), a tie going to the lower class as argmax and `kiln predict` order them: a label
/// is in the top k when fewer than k classes rank above it. Host memory: evaluate_pass does not
/// count it, since reading each batch's logits back would stall a device's eval pipeline (top-1
/// is counted on the device by the loss op).
std::int64_t top_k_hits(const float* logits, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                        std::int64_t k);

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
};

/// Runs `epoch` of the loader (its order; unshuffled eval loaders ignore the epoch).
EvalSums evaluate_pass(const EvalParts& parts, std::int64_t epoch, const LogitsCallback& on_logits = {});

}  // namespace kiln::train
