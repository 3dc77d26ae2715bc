// MaxPool2d and GlobalAvgPool. Max pooling keeps x and y for backward (a backend may instead
// keep its own argmax workspace in the plan); the global average needs nothing saved.
#include <fmt/format.h>

#include "kiln/sdk/nn/image_check.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"

namespace kiln::nn {

Pool2dDesc MaxPool2d::desc(std::int64_t batch) const {
  Pool2dDesc d;
  d.kind = Pool2dDesc::Kind::max;
  d.n = batch;
  d.c = in_.c;
  d.h = in_.h;
  d.w = in_.w;
  d.kernel_h = d.kernel_w = win_.kernel;
  d.stride_h = d.stride_w = win_.stride;
  d.pad_h = d.pad_w = win_.padding;
  d.dtype = dtype_;
  return d;
}

ImageShape MaxPool2d::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  if (win_.kernel < 1 || win_.stride < 1 || win_.padding < 0 || 2 * win_.padding > win_.kernel) {
    throw ConfigError(fmt::format("MaxPool2d(kernel={}, stride={}, padding={}): needs kernel, stride >= 1 "
                                  "and 0 <= padding <= kernel / 2 (as PyTorch)",
                                  win_.kernel, win_.stride, win_.padding));
  }
  require_op(backend, Op::pool2d_forward, dtype, "MaxPool2d");
  require_op(backend, Op::pool2d_backward, dtype, "MaxPool2d");
  in_ = in;
  dtype_ = dtype;
  max_batch_ = max_batch;
  const Pool2dDesc d = desc(max_batch);
  if (d.out_h() < 1 || d.out_w() < 1) {
    throw ConfigError(fmt::format("MaxPool2d: a {}x{} input is too small for a {}x{} window; use a larger "
                                  "image_size", in.h, in.w, win_.kernel, win_.kernel));
  }
  out_ = ImageShape{in.c, d.out_h(), d.out_w()};
  backend_ = &backend;
  y_ = backend.allocate({max_batch, out_.c, out_.h, out_.w}, dtype, MemoryKind::device);
  dx_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
  return out_;
}

Tensor MaxPool2d::forward(const Tensor& x) {
  detail::check_built(backend_, "MaxPool2d", "maxpool");
  detail::check_image(x, in_, max_batch_, "MaxPool2d", "maxpool", "input");
  const std::int64_t b = x.dim(0);
  plan_ = &plans_.get(b, [&](std::int64_t n) { return backend_->plan_pool2d(desc(n)); });
  Tensor y = y_.rows(0, b).with_layout(x.layout());  // same bytes, the input's layout
  backend_->pool2d_forward(*plan_, y, x);
  x_saved_ = x;
  y_saved_ = y;
  return y;
}

Tensor MaxPool2d::backward(const Tensor& dy) {
  if (plan_ == nullptr) throw BackendError("MaxPool2d: backward() before forward()");
  detail::check_same_batch(dy, x_saved_, "MaxPool2d", "maxpool");
  detail::check_image(dy, out_, x_saved_.dim(0), "MaxPool2d", "maxpool", "output gradient");
  Tensor dx = dx_.rows(0, dy.dim(0)).with_layout(x_saved_.layout());
  backend_->pool2d_backward(*plan_, dx, dy, x_saved_, y_saved_);
  return dx;
}

std::int64_t GlobalAvgPool::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  require_op(backend, Op::global_avgpool_forward, dtype, "GlobalAvgPool");
  require_op(backend, Op::global_avgpool_backward, dtype, "GlobalAvgPool");
  in_ = in;
  max_batch_ = max_batch;
  backend_ = &backend;
  y_ = backend.allocate({max_batch, in.c}, dtype, MemoryKind::device);
  dx_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
  return in.c;
}

Tensor GlobalAvgPool::forward(const Tensor& x) {
  detail::check_built(backend_, "GlobalAvgPool", "avgpool");
  detail::check_image(x, in_, max_batch_, "GlobalAvgPool", "avgpool", "input");
  Tensor y = y_.rows(0, x.dim(0));
  in_layout_ = x.layout();
  backend_->global_avgpool_forward(y, x);
  return y;
}

Tensor GlobalAvgPool::backward(const Tensor& dy) {
  detail::check_built(backend_, "GlobalAvgPool", "avgpool");
  if (dy.rank() != 2 || dy.dim(1) != in_.c || dy.dim(0) < 1 || dy.dim(0) > max_batch_) {
    throw BackendError(fmt::format("GlobalAvgPool: output gradient is {}, expected (B, {})", dy.describe(), in_.c));
  }
  Tensor dx = dx_.rows(0, dy.dim(0)).with_layout(in_layout_);  // as the forward's input
  backend_->global_avgpool_backward(dx, dy);
  return dx;
}

}  // namespace kiln::nn
