// ComputeBoundary: the trainer's side of the Model contract's dtype boundary.
//
// A Model computes in the PrecisionPolicy's compute dtype from its first layer to its last
// (kiln/model.hpp); the data loader delivers f32 (or integer) samples and the loss works in f32.
// This class does the three casts between them, so no model has to:
//   input    floating batch (f32)      -> compute dtype, before Model::forward
//            integer batch (u8 images) -> unchanged (the model normalises it on the device)
//   logits   compute dtype             -> f32, for SoftmaxCrossEntropy
//   dlogits  f32 from the loss         -> compute dtype, before Model::backward
// Under an f32 compute dtype nothing is cast or allocated and every call returns its argument,
// so fp32 training is exactly what it was before mixed precision existed.
//
// The buffers are allocated once in build() for max_batch rows and each call returns a view of
// their first rows, valid until the next call of the same kind. Not thread-safe: the trainer
// thread calls everything. Errors: UnsupportedError from build() when the backend cannot cast to
// the compute dtype; BackendError (naming the model) when a tensor breaks the contract.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/model.hpp"
#include "kiln/tensor.hpp"

namespace kiln {
class Backend;
}

namespace kiln::train {

class ComputeBoundary {
 public:
  /// Sizes the cast buffers for `max_batch` rows of `spec` in `compute`. `model` names the
  /// model in error messages.
  void build(Backend& backend, DType compute, const InputSpec& spec, std::int64_t max_batch, std::string model);

  /// x (B, ...) as Model::forward must see it: floating input in the compute dtype (same shape),
  /// integer input unchanged.
  Tensor input(const Tensor& x);
  /// The model's logits (B, K), which must be in the compute dtype, as f32 for the loss.
  Tensor logits(const Tensor& logits);
  /// The loss's f32 dlogits (B, K) in the compute dtype, for Model::backward.
  Tensor dlogits(const Tensor& dlogits);

  DType compute_dtype() const noexcept { return compute_; }

 private:
  /// Rows of `t`, checked against max_batch (`what` names t in the message).
  std::int64_t batch_rows(const Tensor& t, const char* what) const;

  Backend* backend_ = nullptr;
  DType compute_ = DType::f32;
  std::string model_;
  std::int64_t max_batch_ = 0, sample_numel_ = 0, classes_ = 0;
  // Only when compute != f32: the cast input (max_batch, numel(sample)) when the input is
  // floating, and the f32 logits / compute-dtype dlogits (max_batch, K).
  Tensor input_, logits_f32_, dlogits_;
};

}  // namespace kiln::train
