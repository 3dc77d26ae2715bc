// The shared descriptor and matmul checks of kiln/sdk/op_descs.hpp.
#include "kiln/sdk/op_descs.hpp"

#include <fmt/format.h>

namespace kiln::sdk {

std::string describe(const Conv2dDesc& d) {
  return fmt::format("conv2d {} x({}, {}, {}, {}) k={} {}x{} stride {}x{} pad {}x{} dilation {}x{} "
                     "groups {}",
                     dtype_name(d.dtype), d.n, d.c, d.h, d.w, d.k, d.r, d.s, d.stride_h,
                     d.stride_w, d.pad_h, d.pad_w, d.dilation_h, d.dilation_w, d.groups);
}

std::string describe(const Pool2dDesc& d) {
  return fmt::format("{} pool {} ({}, {}, {}, {}) kernel {}x{} stride {}x{} pad {}x{}",
                     d.kind == Pool2dDesc::Kind::max ? "max" : "average", dtype_name(d.dtype),
                     d.n, d.c, d.h, d.w, d.kernel_h, d.kernel_w, d.stride_h, d.stride_w, d.pad_h,
                     d.pad_w);
}

std::string describe(const BatchNormDesc& d) {
  return fmt::format("batchnorm {} ({}, {}, {}, {}) eps {} momentum {}", dtype_name(d.dtype), d.n,
                     d.c, d.h, d.w, d.eps, d.momentum);
}

void check_conv2d_desc(const OpCheck& check, const Conv2dDesc& d) {
  const bool positive = d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0 && d.k > 0 && d.r > 0 &&
                        d.s > 0 && d.stride_h > 0 && d.stride_w > 0 && d.pad_h >= 0 &&
                        d.pad_w >= 0 && d.dilation_h > 0 && d.dilation_w > 0 && d.groups > 0;
  if (!positive) {
    check.fail(fmt::format("{} has a non-positive size, stride, dilation or groups, or a negative "
                           "padding",
                           describe(d)));
  }
  if (d.c % d.groups != 0 || d.k % d.groups != 0) {
    check.fail(fmt::format("{}: input channels {} and output channels {} must both be divisible "
                           "by groups {}",
                           describe(d), d.c, d.k, d.groups));
  }
  if (d.out_h() < 1 || d.out_w() < 1) {
    check.fail(fmt::format("{} gives an empty output ({} x {}); the input is smaller than the "
                           "dilated filter",
                           describe(d), d.out_h(), d.out_w()));
  }
}

void check_pool2d_desc(const OpCheck& check, const Pool2dDesc& d) {
  if (d.n <= 0 || d.c <= 0 || d.h <= 0 || d.w <= 0 || d.kernel_h <= 0 || d.kernel_w <= 0 ||
      d.stride_h <= 0 || d.stride_w <= 0 || d.pad_h < 0 || d.pad_w < 0) {
    check.fail(fmt::format("{} needs positive sizes, kernel and stride and non-negative padding",
                           describe(d)));
  }
  if (2 * d.pad_h > d.kernel_h || 2 * d.pad_w > d.kernel_w) {
    check.fail(fmt::format("{}: padding must be at most half the kernel (as PyTorch), or some "
                           "windows see only padding",
                           describe(d)));
  }
  if (d.out_h() < 1 || d.out_w() < 1) {
    check.fail(fmt::format("{} gives an empty output; the input is smaller than the kernel",
                           describe(d)));
  }
}

void check_batchnorm_desc(const OpCheck& check, const BatchNormDesc& d) {
  if (d.n <= 0 || d.c <= 0 || d.h <= 0 || d.w <= 0 || !(d.eps > 0.0f) ||
      !(d.momentum >= 0.0f && d.momentum <= 1.0f)) {
    check.fail(fmt::format("{} needs positive sizes, eps > 0 and momentum in [0, 1]", describe(d)));
  }
}

namespace {

/// A batch-norm data operand: the plan's dtype and shape, and (unless mixing is accepted) x's layout.
void bn_data(const OpCheck& check, const BatchNormDesc& d, MixedLayouts mixed, const char* name,
             const Tensor& t, const Tensor& x) {
  check.usable_image(name, t).dtype(name, t, d.dtype).shape(name, t, {d.n, d.c, d.h, d.w});
  if (mixed == MixedLayouts::refused) check.same_layout(name, t, "x", x);
}

/// A statistic, gamma/beta or their gradient: f32 (C).
void bn_stat(const OpCheck& check, const BatchNormDesc& d, const char* name, const Tensor& t) {
  check.usable(name, t).dtype(name, t, DType::f32).shape(name, t, {d.c});
}

}  // namespace

void check_batchnorm_train(const OpCheck& check, const BatchNormDesc& d, MixedLayouts mixed,
                           const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                           const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& running_mean, const Tensor& running_var) {
  bn_data(check, d, mixed, "x", x, x);
  bn_data(check, d, mixed, "y", y, x);
  bn_stat(check, d, "save_mean", save_mean);
  bn_stat(check, d, "save_invstd", save_invstd);
  bn_stat(check, d, "gamma", gamma);
  bn_stat(check, d, "beta", beta);
  bn_stat(check, d, "running_mean", running_mean);
  bn_stat(check, d, "running_var", running_var);
  const std::int64_t count = d.n * d.h * d.w;
  if (count < 2) {
    check.fail(fmt::format("{} has {} value per channel; training needs at least 2 (as PyTorch)",
                           describe(d), count));
  }
}

void check_batchnorm_infer(const OpCheck& check, const BatchNormDesc& d, MixedLayouts mixed,
                           const Tensor& y, const Tensor& x, const Tensor& gamma,
                           const Tensor& beta, const Tensor& running_mean,
                           const Tensor& running_var) {
  bn_data(check, d, mixed, "x", x, x);
  bn_data(check, d, mixed, "y", y, x);
  bn_stat(check, d, "gamma", gamma);
  bn_stat(check, d, "beta", beta);
  bn_stat(check, d, "running_mean", running_mean);
  bn_stat(check, d, "running_var", running_var);
}

void check_batchnorm_backward(const OpCheck& check, const BatchNormDesc& d, MixedLayouts mixed,
                              const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                              const Tensor& dy, const Tensor& x, const Tensor& gamma,
                              const Tensor& save_mean, const Tensor& save_invstd) {
  bn_data(check, d, mixed, "x", x, x);
  bn_data(check, d, mixed, "dx", dx, x);
  bn_data(check, d, mixed, "dy", dy, x);
  bn_stat(check, d, "dgamma", dgamma);
  bn_stat(check, d, "dbeta", dbeta);
  bn_stat(check, d, "gamma", gamma);
  bn_stat(check, d, "save_mean", save_mean);
  bn_stat(check, d, "save_invstd", save_invstd);
}

void check_batchnorm_stats(const OpCheck& check, const BatchNormDesc& d, const Tensor& mean, const Tensor& var,
                           const Tensor& x) {
  bn_data(check, d, MixedLayouts::refused, "x", x, x);
  bn_stat(check, d, "mean", mean);
  bn_stat(check, d, "var", var);
  // One value per channel is allowed here (variance 0): the 2-value minimum of training applies
  // to the global batch, which the caller checks after summing over ranks.
}

void check_batchnorm_backward_reduce(const OpCheck& check, const BatchNormDesc& d, const Tensor& sum_dy,
                                     const Tensor& sum_dy_xhat, const Tensor& dy, const Tensor& x,
                                     const Tensor& save_mean, const Tensor& save_invstd) {
  bn_data(check, d, MixedLayouts::refused, "x", x, x);
  bn_data(check, d, MixedLayouts::refused, "dy", dy, x);
  bn_stat(check, d, "sum_dy", sum_dy);
  bn_stat(check, d, "sum_dy_xhat", sum_dy_xhat);
  bn_stat(check, d, "save_mean", save_mean);
  bn_stat(check, d, "save_invstd", save_invstd);
}

void check_batchnorm_backward_elemt(const OpCheck& check, const BatchNormDesc& d, const Tensor& dx,
                                    const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                    const Tensor& save_mean, const Tensor& save_invstd, const Tensor& sum_dy,
                                    const Tensor& sum_dy_xhat, std::int64_t count) {
  bn_data(check, d, MixedLayouts::refused, "x", x, x);
  bn_data(check, d, MixedLayouts::refused, "dx", dx, x);
  bn_data(check, d, MixedLayouts::refused, "dy", dy, x);
  bn_stat(check, d, "gamma", gamma);
  bn_stat(check, d, "save_mean", save_mean);
  bn_stat(check, d, "save_invstd", save_invstd);
  bn_stat(check, d, "sum_dy", sum_dy);
  bn_stat(check, d, "sum_dy_xhat", sum_dy_xhat);
  if (count < d.n * d.h * d.w) {
    check.fail(fmt::format("{}: count {} (values per channel over every rank) is less than this batch's {}",
                           describe(d), count, d.n * d.h * d.w));
  }
}

MatmulDims check_matmul(const OpCheck& check, const Tensor& c, const Tensor& a, Transpose ta,
                        const Tensor& b, Transpose tb, const Tensor& bias) {
  check.usable("c", c).usable("a", a).usable("b", b).rank("c", c, 2).rank("a", a, 2).rank("b", b, 2);
  check.float_dtype("a", a).dtype("b", b, a.dtype());
  if (c.dtype() != DType::f32 && c.dtype() != a.dtype()) {
    check.fail(fmt::format("c is {} but must be f32 or {} for a {}", c.describe(),
                           dtype_name(a.dtype()), a.describe()));
  }
  MatmulDims dims;
  dims.m = ta == Transpose::no ? a.dim(0) : a.dim(1);
  dims.k = ta == Transpose::no ? a.dim(1) : a.dim(0);
  const std::int64_t kb = tb == Transpose::no ? b.dim(0) : b.dim(1);
  dims.n = tb == Transpose::no ? b.dim(1) : b.dim(0);
  if (dims.k != kb) {
    check.fail(fmt::format("op(a) of a {} (transposed: {}) is ({}, {}) but op(b) of b {} "
                           "(transposed: {}) is ({}, {}); their inner dimensions must match",
                           a.describe(), ta == Transpose::yes, dims.m, dims.k, b.describe(),
                           tb == Transpose::yes, kb, dims.n));
  }
  check.shape("c", c, {dims.m, dims.n});
  if (bias.defined()) {
    check.usable("bias", bias).shape("bias", bias, {dims.n});
    if (bias.dtype() != DType::f32 && bias.dtype() != c.dtype()) {
      check.fail(fmt::format("bias is {} but must be f32 or {}", bias.describe(),
                             dtype_name(c.dtype())));
    }
  }
  return dims;
}

}  // namespace kiln::sdk
