// ReluInPlace: the ReLU after a batch norm inside the stem and residual branches, applied in
// place on the batch norm's output (whose backward needs its input, not its output), as
// torchvision's ReLU(inplace=True). Backward reads relu' from y.
#include "kiln/sdk/nn/image_check.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"

namespace kiln::nn {

void ReluInPlace::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  require_op(backend, Op::activation_forward, dtype, "ReLU");
  require_op(backend, Op::activation_backward, dtype, "ReLU");
  in_ = in;
  max_batch_ = max_batch;
  backend_ = &backend;
  dx_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
}

Tensor ReluInPlace::forward(const Tensor& x) {
  detail::check_built(backend_, "ReLU", "relu");
  detail::check_image(x, in_, max_batch_, "ReLU", "relu", "input");
  backend_->activation_forward(x, x, Activation::relu);
  y_saved_ = x;
  return x;
}

Tensor ReluInPlace::backward(const Tensor& dy) {
  detail::check_image(dy, in_, max_batch_, "ReLU", "relu", "output gradient");
  Tensor dx = dx_.rows(0, dy.dim(0)).with_layout(dy.layout());
  // relu' is read from y (y > 0), so the overwritten input is not needed; y stands in for x.
  backend_->activation_backward(dx, dy, y_saved_, y_saved_, Activation::relu, Accumulate::no);
  return dx;
}

}  // namespace kiln::nn
