// The loss layer: softmax cross-entropy whose running totals stay on the device.
#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "kiln/sdk/nn/layers.hpp"

namespace kiln::nn {

void SoftmaxCrossEntropy::build(Backend& backend, std::int64_t max_batch, std::int64_t classes) {
  require_op(backend, Op::softmax_xent_forward, DType::f32, "SoftmaxCrossEntropy");
  require_op(backend, Op::softmax_xent_backward, DType::f32, "SoftmaxCrossEntropy");
  backend_ = &backend;
  probs_ = backend.allocate({max_batch, classes}, DType::f32, MemoryKind::device);
  dlogits_ = backend.allocate({max_batch, classes}, DType::f32, MemoryKind::device);
  stats_ = backend.allocate({2}, DType::f32, MemoryKind::device);
  stats_host_ = host_tensor({2}, DType::f32);
  reset_totals();
}

void SoftmaxCrossEntropy::forward(const Tensor& logits, const Tensor& labels, std::int64_t valid_rows) {
  rows_ = logits.dim(0);
  if (valid_rows < 0 || valid_rows > rows_) {
    throw BackendError(fmt::format("valid_rows {} out of range for logits {}", valid_rows, logits.describe()));
  }
  valid_ = valid_rows;
  labels_saved_ = labels;
  if (valid_ == 0) return;
  backend_->softmax_xent_forward(probs_.rows(0, valid_), stats_, logits.rows(0, valid_),
                                 labels.rows(0, valid_), smoothing_);
}

Tensor SoftmaxCrossEntropy::backward(float scale) {
  Tensor dlogits = dlogits_.rows(0, rows_);
  if (valid_ < rows_) backend_->fill(dlogits_.rows(valid_, rows_ - valid_), 0.0);
  if (valid_ > 0) {
    backend_->softmax_xent_backward(dlogits_.rows(0, valid_), probs_.rows(0, valid_),
                                    labels_saved_.rows(0, valid_), smoothing_, scale);
  }
  return dlogits;
}

void SoftmaxCrossEntropy::reset_totals() { backend_->fill(stats_, 0.0); }

std::pair<double, double> SoftmaxCrossEntropy::totals() {
  backend_->copy(stats_, stats_host_);
  const float* s = stats_host_.data_as<float>();
  return {s[0], s[1]};
}

}  // namespace kiln::nn
