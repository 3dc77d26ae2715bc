// BatchNorm2d's synchronised training path (the store's batch_norm_sync() set; model.hpp's
// BatchNormSync), PyTorch SyncBatchNorm's arithmetic split into backend ops and cross-rank sums:
//
// forward   batchnorm_stats gives this rank's mean m_r and biased variance v_r over its n_r values
//           per channel; summed over ranks in f64: n_r m_r, n_r (v_r + m_r^2) and n_r, so
//           mean = S1 / N and var = S2 / N - mean^2 (cancellation is harmless in f64: each rank's
//           own variance was taken in two passes). batchnorm_infer_forward then normalises with
//           those global statistics, and the running ones take the PyTorch update with the
//           unbiased global variance var * N / (N - 1).
// backward  batchnorm_backward_reduce gives this rank's sum(dy) and sum(dy * xhat); they are added
//           into dbeta/dgamma as they are (GradSync sums parameter gradients over ranks, so the
//           global sums arrive there), then summed over ranks for batchnorm_backward_elemt, whose
//           dx is the one of a single rank holding the global batch.
//
// The per-channel arithmetic between the ops is done on the host (C values; the copies into host
// memory are complete when they return); each forward and backward makes one all-reduce.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kiln/errors.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"
#include "kiln/sdk/nn/layers.hpp"

namespace kiln::nn {

void BatchNorm2d::build_sync(Backend& backend) {
  for (Op op : {Op::batchnorm_stats, Op::batchnorm_backward_reduce, Op::batchnorm_backward_elemt}) {
    require_op(backend, op, dtype_, "BatchNorm2d (sync_bn)");
  }
  require_op(backend, Op::add, DType::f32, "BatchNorm2d (sync_bn)");
  sync_ = store_.batch_norm_sync();
  stat_a_ = backend.allocate({channels_}, DType::f32, MemoryKind::device);
  stat_b_ = backend.allocate({channels_}, DType::f32, MemoryKind::device);
  for (Tensor* t : {&host_a_, &host_b_, &host_c_, &host_d_, &host_e_}) {
    *t = backend.allocate({channels_}, DType::f32, MemoryKind::host);
  }
  summed_.assign(static_cast<std::size_t>(2 * channels_ + 1), 0.0);
  sync_->attach(prefix_);
}

void BatchNorm2d::sync_train_forward(const Tensor& y, const Tensor& x) {
  const std::size_t c = static_cast<std::size_t>(channels_);
  const double n = static_cast<double>(x.dim(0) * in_.h * in_.w);
  backend_->batchnorm_stats(*plan_, stat_a_, stat_b_, x);
  backend_->copy(stat_a_, host_a_);
  backend_->copy(stat_b_, host_b_);
  float* mean = host_a_.data_as<float>();
  float* var = host_b_.data_as<float>();
  summed_.resize(2 * c + 1);
  for (std::size_t k = 0; k < c; ++k) {
    const double m = mean[k];
    summed_[k] = n * m;
    summed_[c + k] = n * (double{var[k]} + m * m);
  }
  summed_[2 * c] = n;
  sync_->all_reduce_sum(summed_);
  const double total = summed_[2 * c];
  if (total < 2) {
    throw BackendError(fmt::format("BatchNorm2d '{}' (sync_bn): {} value per channel over all ranks; training needs "
                                   "at least 2",
                                   prefix_, total));
  }
  global_count_ = static_cast<std::int64_t>(total);
  // host_a_: global mean, host_b_: global biased variance, host_c_: invstd; the running
  // statistics (host_d_, host_e_) take the update on the host too (C values each).
  float* invstd = host_c_.data_as<float>();
  backend_->copy(buffers_[0].value, host_d_);
  backend_->copy(buffers_[1].value, host_e_);
  float* running_mean = host_d_.data_as<float>();
  float* running_var = host_e_.data_as<float>();
  const double momentum = momentum_;
  for (std::size_t k = 0; k < c; ++k) {
    const double m = summed_[k] / total;
    const double v = std::max(0.0, summed_[c + k] / total - m * m);
    mean[k] = static_cast<float>(m);
    var[k] = static_cast<float>(v);
    invstd[k] = static_cast<float>(1.0 / std::sqrt(v + double{eps_}));
    running_mean[k] = static_cast<float>((1.0 - momentum) * running_mean[k] + momentum * m);
    running_var[k] = static_cast<float>((1.0 - momentum) * running_var[k] + momentum * v * total / (total - 1));
  }
  backend_->copy(host_d_, buffers_[0].value);
  backend_->copy(host_e_, buffers_[1].value);
  backend_->copy(host_a_, save_mean_);
  backend_->copy(host_c_, save_invstd_);
  backend_->copy(host_b_, stat_b_);  // the global variance, for the normalisation
  const Parameter& gamma = store_[gamma_];
  const Parameter& beta = store_[beta_];
  backend_->batchnorm_infer_forward(*plan_, y, x, gamma.value, beta.value, save_mean_, stat_b_);
}

void BatchNorm2d::sync_backward(const Tensor& dx, const Tensor& dy) {
  const std::size_t c = static_cast<std::size_t>(channels_);
  const Parameter& gamma = store_[gamma_];
  const Parameter& beta = store_[beta_];
  // stat_a_ = sum(dy), stat_b_ = sum(dy * xhat) over this rank's batch.
  backend_->batchnorm_backward_reduce(*plan_, stat_a_, stat_b_, dy, x_saved_, save_mean_, save_invstd_);
  backend_->add(beta.grad, beta.grad, stat_a_);
  backend_->add(gamma.grad, gamma.grad, stat_b_);
  backend_->copy(stat_a_, host_a_);
  backend_->copy(stat_b_, host_b_);
  float* sum_dy = host_a_.data_as<float>();
  float* sum_dy_xhat = host_b_.data_as<float>();
  summed_.resize(2 * c);
  for (std::size_t k = 0; k < c; ++k) {
    summed_[k] = sum_dy[k];
    summed_[c + k] = sum_dy_xhat[k];
  }
  sync_->all_reduce_sum(summed_);
  for (std::size_t k = 0; k < c; ++k) {
    sum_dy[k] = static_cast<float>(summed_[k]);
    sum_dy_xhat[k] = static_cast<float>(summed_[c + k]);
  }
  backend_->copy(host_a_, stat_a_);
  backend_->copy(host_b_, stat_b_);
  backend_->batchnorm_backward_elemt(*plan_, dx, dy, x_saved_, gamma.value, save_mean_, save_invstd_, stat_a_,
                                     stat_b_, global_count_);
}

}  // namespace kiln::nn
