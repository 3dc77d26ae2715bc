// BatchNorm2d: per-channel batch normalisation with PyTorch's running-statistics rule.
//
// gamma/beta and every statistic are f32 in any compute dtype (read from the master copy,
// Parameter::value), as cuDNN and oneDNN want them; only x, y, dx, dy use the compute dtype.
// The running statistics are model buffers (checkpointed, broadcast from rank 0), not
// parameters: no gradient, no optimizer.
//
// Frozen statistics ([model] frozen_bn = "eval", ModelBuildContext::frozen_bn): a layer whose
// gamma and beta are both frozen normalises with its running statistics in training as in eval,
// y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta, and never updates them. Its
// backward is that fixed affine map's: dx = gamma / sqrt(running_var + eps) * dy, which is the
// inference forward applied to dy with a zero mean and a zero beta, so no backend needs a new op.
#include <fmt/format.h>

#include "kiln/sdk/nn/image_check.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"

namespace kiln::nn {

BatchNorm2d::BatchNorm2d(ParameterStore& store, const std::string& prefix, std::int64_t channels,
                         GammaInit gamma_init, float momentum, float eps)
    : store_(store), prefix_(prefix), channels_(channels), momentum_(momentum), eps_(eps) {
  if (channels_ < 1) throw ConfigError(fmt::format("{}: BatchNorm2d needs at least 1 channel, got {}", prefix, channels_));
  if (!(momentum_ >= 0.0f && momentum_ <= 1.0f)) {
    throw ConfigError(fmt::format("{}: BatchNorm2d momentum {} is not in [0, 1]", prefix, momentum_));
  }
  if (!(eps_ > 0.0f)) throw ConfigError(fmt::format("{}: BatchNorm2d eps {} must be > 0", prefix, eps_));
  gamma_ = store_.declare(prefix + ".weight", {channels_},
                          gamma_init == GammaInit::ones ? Init::ones() : Init::zeros(), kParamNoWeightDecay);
  beta_ = store_.declare(prefix + ".bias", {channels_}, Init::zeros(), kParamNoWeightDecay);
}

BatchNormDesc BatchNorm2d::desc(std::int64_t batch) const {
  BatchNormDesc d;
  d.n = batch;
  d.c = channels_;
  d.h = in_.h;
  d.w = in_.w;
  d.eps = eps_;
  d.momentum = momentum_;
  d.dtype = dtype_;
  return d;
}

void BatchNorm2d::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  if (in.c != channels_) {
    throw ConfigError(fmt::format("{}: BatchNorm2d has {} channels, the layer before gives {}",
                                  prefix_, channels_, in.c));
  }
  require_op(backend, Op::batchnorm_train_forward, dtype, "BatchNorm2d");
  require_op(backend, Op::batchnorm_infer_forward, dtype, "BatchNorm2d");
  require_op(backend, Op::batchnorm_backward, dtype, "BatchNorm2d");
  in_ = in;
  dtype_ = dtype;
  max_batch_ = max_batch;
  backend_ = &backend;
  y_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
  dx_ = backend.allocate({max_batch, in.c, in.h, in.w}, dtype, MemoryKind::device);
  save_mean_ = backend.allocate({channels_}, DType::f32, MemoryKind::device);
  save_invstd_ = backend.allocate({channels_}, DType::f32, MemoryKind::device);
  Tensor running_mean = backend.allocate({channels_}, DType::f32, MemoryKind::device);
  Tensor running_var = backend.allocate({channels_}, DType::f32, MemoryKind::device);
  backend.fill(running_mean, 0.0);
  backend.fill(running_var, 1.0);
  frozen_statistics_ = store_.frozen_bn() == Mode::eval && store_.frozen(gamma_) && store_.frozen(beta_);
  const std::uint32_t flags = frozen_statistics_ ? kBufferFrozen : kBufferNone;
  buffers_ = {ModelBuffer{prefix_ + ".running_mean", running_mean, flags},
              ModelBuffer{prefix_ + ".running_var", running_var, flags}};
  if (frozen_statistics_) {
    zeros_ = backend.allocate({channels_}, DType::f32, MemoryKind::device);
    backend.fill(zeros_, 0.0);
  } else if (store_.batch_norm_sync() != nullptr) {
    build_sync(backend);  // a layer with frozen statistics has no batch statistics to share
  }
}

Tensor BatchNorm2d::forward(const Tensor& x, Mode mode) {
  detail::check_built(backend_, "BatchNorm2d", prefix_);
  detail::check_image(x, in_, max_batch_, "BatchNorm2d", prefix_, "input");
  const std::int64_t b = x.dim(0);
  plan_ = &plans_.get(b, [&](std::int64_t n) { return backend_->plan_batchnorm(desc(n)); });
  last_mode_ = mode;
  x_saved_ = x;
  Tensor y = y_.rows(0, b).with_layout(x.layout());  // same bytes, the input's layout
  const Parameter& gamma = store_[gamma_];
  const Parameter& beta = store_[beta_];
  if (mode == Mode::eval || frozen_statistics_) {
    backend_->batchnorm_infer_forward(*plan_, y, x, gamma.value, beta.value, buffers_[0].value,
                                      buffers_[1].value);
  } else if (sync_ != nullptr) {
    sync_train_forward(y, x);
  } else {
    backend_->batchnorm_train_forward(*plan_, y, save_mean_, save_invstd_, x, gamma.value, beta.value,
                                      buffers_[0].value, buffers_[1].value);
  }
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& dy) {
  if (plan_ == nullptr || last_mode_ != Mode::train) {
    throw BackendError(fmt::format("BatchNorm2d '{}': backward() needs a Mode::train forward() first", prefix_));
  }
  detail::check_same_batch(dy, x_saved_, "BatchNorm2d", prefix_);
  detail::check_image(dy, in_, x_saved_.dim(0), "BatchNorm2d", prefix_, "output gradient");
  const Parameter& gamma = store_[gamma_];
  const Parameter& beta = store_[beta_];
  Tensor dx = dx_.rows(0, dy.dim(0)).with_layout(x_saved_.layout());
  if (frozen_statistics_) {  // no dgamma, dbeta: both are frozen
    backend_->batchnorm_infer_forward(*plan_, dx, dy, gamma.value, zeros_, zeros_, buffers_[1].value);
    return dx;
  }
  if (sync_ != nullptr) {
    sync_backward(dx, dy);
    return dx;
  }
  backend_->batchnorm_backward(*plan_, dx, gamma.grad, beta.grad, dy, x_saved_, gamma.value, save_mean_,
                               save_invstd_);
  return dx;
}

}  // namespace kiln::nn
