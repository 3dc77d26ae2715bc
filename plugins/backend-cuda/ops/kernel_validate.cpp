// Argument validation of the kernel-group ops (kernel_validate.hpp): the SDK's shared check of
// each op (kiln/sdk/op_args.hpp, the same rules and words as every backend) for device memory,
// plus what only these kernels need (32-bit row and class counts) and the launch geometry.
#include "ops/kernel_validate.hpp"

#include <climits>

#include <fmt/format.h>

#include "kiln/sdk/op_args.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "ops/kernel_check.hpp"

namespace kiln::cuda {

std::int64_t validate_activation_forward(const Tensor& y, const Tensor& x, Activation act) {
  sdk::check_activation_forward(KernelCheck(Op::activation_forward), y, x, act);
  return x.numel();
}

const Tensor& validate_activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                           const Tensor& y, Activation act) {
  return sdk::check_activation_backward(KernelCheck(Op::activation_backward), dx, dy, x, y, act);
}

void validate_add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) {
  sdk::check_add_relu_forward(KernelCheck(Op::add_relu_forward), y, x, residual);
}

void validate_dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p) {
  sdk::check_dropout_forward(KernelCheck(Op::dropout_forward), y, mask, x, p);
}

void validate_dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  sdk::check_dropout_backward(KernelCheck(Op::dropout_backward), dx, dy, mask, p);
}

void validate_add(const Tensor& c, const Tensor& a, const Tensor& b) {
  sdk::check_add(KernelCheck(Op::add), c, a, b);
}

void validate_cast(const Tensor& dst, const Tensor& src) { sdk::check_cast(KernelCheck(Op::cast), dst, src); }

void validate_scale(const Tensor& t) { sdk::check_scale(KernelCheck(Op::scale), t); }

void validate_lerp(const Tensor& dst, const Tensor& src, float weight) {
  sdk::check_lerp(KernelCheck(Op::lerp), dst, src, weight);
}

void validate_check_finite(const Tensor& flag, const Tensor& t) {
  sdk::check_check_finite(KernelCheck(Op::check_finite), flag, t);
}

kernels::RowsClasses validate_softmax_xent_forward(const Tensor& probs, const Tensor& stats,
                                                   const Tensor& logits, const Tensor& labels,
                                                   float label_smoothing) {
  const KernelCheck check(Op::softmax_xent_forward);
  const sdk::RowsClasses rc = sdk::check_softmax_xent_forward(check, probs, stats, logits, labels, label_smoothing);
  // The kernels index rows and classes with 32-bit ints.
  if (rc.classes > INT32_MAX || rc.rows > INT32_MAX) {
    check.fail(fmt::format("logits {} is too large: the kernel takes at most 2^31 - 1 rows and "
                           "classes",
                           logits.describe()));
  }
  return {rc.rows, rc.classes};
}

kernels::RowsClasses validate_softmax_xent_backward(const Tensor& dlogits, const Tensor& probs,
                                                    const Tensor& labels, float label_smoothing) {
  const sdk::RowsClasses rc =
      sdk::check_softmax_xent_backward(KernelCheck(Op::softmax_xent_backward), dlogits, probs, labels, label_smoothing);
  return {rc.rows, rc.classes};
}

kernels::RowsClasses validate_top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels,
                                         std::int64_t k) {
  const KernelCheck check(Op::top_k_hits);
  const sdk::RowsClasses rc = sdk::check_top_k_hits(check, count, logits, labels, k);
  if (rc.classes > INT32_MAX || rc.rows > INT32_MAX) {
    check.fail(fmt::format("logits {} is too large: the kernel takes at most 2^31 - 1 rows and "
                           "classes",
                           logits.describe()));
  }
  return {rc.rows, rc.classes};
}

void validate_sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                         const SgdStep& step) {
  sdk::check_sgd_update(KernelCheck(Op::sgd_update), param, momentum, grad, step);
}

void validate_adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                          const Tensor& grad, const AdamStep& step) {
  sdk::check_adam_update(KernelCheck(Op::adam_update), param, m, v, grad, step);
}

kernels::ImageGeometry validate_global_avgpool_forward(const Tensor& y, const Tensor& x) {
  sdk::check_global_avgpool_forward(KernelCheck(Op::global_avgpool_forward), y, x);
  return {x.dim(0), x.dim(1), x.dim(2) * x.dim(3), x.layout()};
}

kernels::ImageGeometry validate_global_avgpool_backward(const Tensor& dx, const Tensor& dy) {
  sdk::check_global_avgpool_backward(KernelCheck(Op::global_avgpool_backward), dx, dy);
  return {dx.dim(0), dx.dim(1), dx.dim(2) * dx.dim(3), dx.layout()};
}

kernels::ChannelAffine validate_normalize_image(const Tensor& dst, const Tensor& src,
                                                const ImageNormalize& norm) {
  sdk::check_normalize_image(KernelCheck(Op::normalize_image), dst, src, norm);
  // (x / 255 - mean) / std as one multiply-add per element.
  kernels::ChannelAffine affine;
  for (int c = 0; c < 3; ++c) {
    affine.scale[c] = 1.0f / (255.0f * norm.std[c]);
    affine.shift[c] = -norm.mean[c] / norm.std[c];
  }
  return affine;
}

// The synchronised batch-norm ops: the SDK's checks (the plan's dtype and shape, x's layout for
// every image operand, f32 (C) statistics), and the channel count as a grid dimension (the NCHW
// reduction runs one block column per channel).
namespace {

kernels::ChannelWalk batchnorm_walk(const KernelCheck& check, const BatchNormDesc& d, const Tensor& x) {
  if (d.c > INT32_MAX) {
    check.fail(fmt::format("{} has more channels than the kernels' grid takes (2^31 - 1)", sdk::describe(d)));
  }
  return kernels::channel_walk(d.n, d.c, d.h, d.w, x.layout());
}

}  // namespace

kernels::ChannelWalk validate_batchnorm_stats(const BatchNormDesc& d, const Tensor& mean, const Tensor& var,
                                              const Tensor& x) {
  const KernelCheck check(Op::batchnorm_stats);
  sdk::check_batchnorm_stats(check, d, mean, var, x);
  return batchnorm_walk(check, d, x);
}

kernels::ChannelWalk validate_batchnorm_backward_reduce(const BatchNormDesc& d, const Tensor& sum_dy,
                                                        const Tensor& sum_dy_xhat, const Tensor& dy, const Tensor& x,
                                                        const Tensor& save_mean, const Tensor& save_invstd) {
  const KernelCheck check(Op::batchnorm_backward_reduce);
  sdk::check_batchnorm_backward_reduce(check, d, sum_dy, sum_dy_xhat, dy, x, save_mean, save_invstd);
  return batchnorm_walk(check, d, x);
}

kernels::ChannelWalk validate_batchnorm_backward_elemt(const BatchNormDesc& d, const Tensor& dx, const Tensor& dy,
                                                       const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                                       const Tensor& save_invstd, const Tensor& sum_dy,
                                                       const Tensor& sum_dy_xhat, std::int64_t count) {
  const KernelCheck check(Op::batchnorm_backward_elemt);
  sdk::check_batchnorm_backward_elemt(check, d, dx, dy, x, gamma, save_mean, save_invstd, sum_dy, sum_dy_xhat,
                                      count);
  return batchnorm_walk(check, d, x);
}

}  // namespace kiln::cuda
