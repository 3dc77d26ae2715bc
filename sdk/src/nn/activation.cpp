// Element-wise activation layer; keeps x and y because relu/tanh/sigmoid backward want y and
// gelu wants x.
#include "kiln/sdk/nn/layers.hpp"

namespace kiln::nn {

void ActivationLayer::build(Backend& backend, std::int64_t max_batch, std::int64_t features, DType dtype) {
  require_op(backend, Op::activation_forward, dtype, "Activation");
  require_op(backend, Op::activation_backward, dtype, "Activation");
  backend_ = &backend;
  y_ = backend.allocate({max_batch, features}, dtype, MemoryKind::device);
  dx_ = backend.allocate({max_batch, features}, dtype, MemoryKind::device);
}

Tensor ActivationLayer::forward(const Tensor& x) {
  Tensor y = y_.rows(0, x.dim(0));
  backend_->activation_forward(y, x, act_);
  x_saved_ = x;
  y_saved_ = y;
  return y;
}

Tensor ActivationLayer::backward(const Tensor& dy) {
  Tensor dx = dx_.rows(0, dy.dim(0));
  backend_->activation_backward(dx, dy, x_saved_, y_saved_, act_, Accumulate::no);
  return dx;
}

}  // namespace kiln::nn
