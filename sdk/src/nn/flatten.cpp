// Flatten: (B, C, H, W) -> (B, C*H*W) in PyTorch's (C, H, W) feature order.
//
// A row-major (NCHW) activation already holds its features in that order, so forward and backward
// are views. A channels-last one holds them as (H, W, C); reading its bytes as features would
// silently permute them (a Linear after it would learn, but its weights would not load into or
// from PyTorch), so forward rearranges into NCHW with Backend::convert_layout and backward
// rearranges the gradient back into the layout the previous layer produced. Both buffers are
// allocated at build() because the layout an input arrives in is known only at forward().
#include <fmt/format.h>

#include "kiln/sdk/nn/cnn_layers.hpp"
#include "kiln/sdk/nn/image_check.hpp"

namespace kiln::nn {

std::int64_t Flatten::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  if (in.c < 1 || in.h < 1 || in.w < 1) {
    throw ConfigError(fmt::format("Flatten: input ({}, {}, {}) must have positive sizes", in.c, in.h, in.w));
  }
  // Channels-last inputs come from the backend's own activation layout; only then is the op needed.
  if (backend.activation_layout(dtype) == Layout::nhwc) require_op(backend, Op::convert_layout, dtype, "Flatten");
  in_ = in;
  max_batch_ = max_batch;
  backend_ = &backend;
  y_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
  dx_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
  return in.c * in.h * in.w;
}

Tensor Flatten::forward(const Tensor& x) {
  detail::check_built(backend_, "Flatten", "flatten");
  detail::check_image(x, in_, max_batch_, "Flatten", "flatten", "input");
  const std::int64_t b = x.dim(0), features = in_.c * in_.h * in_.w;
  in_layout_ = x.layout();
  if (x.layout() == Layout::row_major) return x.reshape({b, features});
  const Tensor nchw = y_.rows(0, b);
  backend_->convert_layout(nchw, x);
  return nchw.reshape({b, features});
}

Tensor Flatten::backward(const Tensor& dy) {
  detail::check_built(backend_, "Flatten", "flatten");
  const std::int64_t features = in_.c * in_.h * in_.w;
  if (dy.rank() != 2 || dy.dim(1) != features || dy.dim(0) < 1 || dy.dim(0) > max_batch_ ||
      dy.layout() != Layout::row_major) {
    throw BackendError(fmt::format("Flatten: output gradient is {}, expected row-major (B, {}) with 1 <= B <= {}",
                                   dy.describe(), features, max_batch_));
  }
  const std::int64_t b = dy.dim(0);
  const Tensor dy_image = dy.reshape({b, in_.c, in_.h, in_.w});
  if (in_layout_ == Layout::row_major) return dy_image;
  const Tensor dx = dx_.rows(0, b).with_layout(in_layout_);  // as the forward's input
  backend_->convert_layout(dx, dy_image);
  return dx;
}

}  // namespace kiln::nn
