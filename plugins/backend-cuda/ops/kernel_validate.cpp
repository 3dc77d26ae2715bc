// Argument validation of the kernel-group ops (kernel_validate.hpp): the cpu backend's checks
// (plugins/backend-cpu/ops/*.cpp) rule for rule and message for message, plus device memory and
// layout agreement (kernel_check.hpp).
#include "ops/kernel_validate.hpp"

#include <fmt/format.h>

#include "ops/kernel_check.hpp"

namespace kiln::cuda {
namespace {

void check_activation(const KernelCheck& check, Activation act) {
  if (static_cast<int>(act) > static_cast<int>(Activation::gelu)) {
    check.fail(fmt::format("unknown activation {}", static_cast<int>(act)));
  }
}

void check_probability(const KernelCheck& check, float p) {
  if (!(p >= 0.0f && p < 1.0f)) {
    check.fail(fmt::format("p = {} is outside [0, 1); set the model's dropout to a probability "
                           "below 1",
                           p));
  }
}

void check_smoothing(const KernelCheck& check, float s) {
  if (!(s >= 0.0f && s < 1.0f)) check.fail(fmt::format("label_smoothing = {} is outside [0, 1)", s));
}

}  // namespace

std::optional<bool> kernel_group_supports(Op op, DType dtype) noexcept {
  const bool f32 = dtype == DType::f32;
  const bool any_float = f32 || dtype == DType::bf16 || dtype == DType::f16;
  switch (op) {
    case Op::activation_forward:
    case Op::activation_backward:
    case Op::add_relu_forward:
    case Op::dropout_forward:
    case Op::dropout_backward:
    case Op::add:
    case Op::cast:
    case Op::scale:
    case Op::check_finite:
    case Op::global_avgpool_forward:
    case Op::global_avgpool_backward:
    case Op::normalize_image:
      return any_float;
    case Op::softmax_xent_forward:
    case Op::softmax_xent_backward:
    case Op::sgd_update:
    case Op::adam_update:
      return f32;
    default:
      return std::nullopt;
  }
}

std::int64_t validate_activation_forward(const Tensor& y, const Tensor& x, Activation act) {
  const KernelCheck check(Op::activation_forward);
  check.usable_image("y", y).usable_image("x", x).float_dtype("x", x).dtype("y", y, x.dtype());
  check.same_shape("y", y, "x", x).same_layout("y", y, "x", x);
  check_activation(check, act);
  return x.numel();
}

const Tensor& validate_activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                           const Tensor& y, Activation act) {
  const KernelCheck check(Op::activation_backward);
  check.usable_image("dx", dx).usable_image("dy", dy).float_dtype("dy", dy).dtype("dx", dx, dy.dtype());
  check.same_shape("dx", dx, "dy", dy).same_layout("dx", dx, "dy", dy);
  check_activation(check, act);
  const bool needs_x = act == Activation::gelu;
  const Tensor& saved = needs_x ? x : y;
  const char* saved_name = needs_x ? "x" : "y";
  check.usable_image(needs_x ? "x (gelu's backward reads x)" : "y (its backward reads y = act(x))", saved)
      .dtype(saved_name, saved, dy.dtype())
      .same_shape(saved_name, saved, "dy", dy)
      .same_layout(saved_name, saved, "dy", dy);
  if (!needs_x && x.defined()) check.same_shape("x", x, "dy", dy);
  if (needs_x && y.defined()) check.same_shape("y", y, "dy", dy);
  return saved;
}

void validate_add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) {
  const KernelCheck check(Op::add_relu_forward);
  check.usable_image("y", y).usable_image("x", x).usable_image("residual", residual);
  check.float_dtype("y", y).dtype("x", x, y.dtype()).dtype("residual", residual, y.dtype());
  check.same_shape("x", x, "y", y).same_shape("residual", residual, "y", y);
  check.same_layout("x", x, "y", y).same_layout("residual", residual, "y", y);
}

void validate_dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p) {
  const KernelCheck check(Op::dropout_forward);
  check.usable_image("y", y).usable_image("mask", mask).usable_image("x", x);
  check.float_dtype("x", x).dtype("y", y, x.dtype()).dtype("mask", mask, DType::u8);
  check.same_shape("y", y, "x", x).same_numel("mask", mask, "x", x).same_layout("y", y, "x", x);
  check_probability(check, p);
}

void validate_dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  const KernelCheck check(Op::dropout_backward);
  check.usable_image("dx", dx).usable_image("dy", dy).usable_image("mask", mask);
  check.float_dtype("dy", dy).dtype("dx", dx, dy.dtype()).dtype("mask", mask, DType::u8);
  check.same_shape("dx", dx, "dy", dy).same_numel("mask", mask, "dy", dy);
  check.same_layout("dx", dx, "dy", dy);
  check_probability(check, p);
}

void validate_add(const Tensor& c, const Tensor& a, const Tensor& b) {
  const KernelCheck check(Op::add);
  check.usable_image("c", c).usable_image("a", a).usable_image("b", b);
  check.float_dtype("c", c).dtype("a", a, c.dtype()).dtype("b", b, c.dtype());
  check.same_shape("a", a, "c", c).same_shape("b", b, "c", c);
  check.same_layout("a", a, "c", c).same_layout("b", b, "c", c);
}

void validate_cast(const Tensor& dst, const Tensor& src) {
  const KernelCheck check(Op::cast);
  check.usable_image("dst", dst).usable_image("src", src).same_numel("dst", dst, "src", src);
  const auto castable = [](DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; };
  if (!castable(dst.dtype()) || !castable(src.dtype()) ||
      (dst.dtype() != DType::f32 && src.dtype() != DType::f32 && dst.dtype() != src.dtype())) {
    check.fail(fmt::format("cannot convert src {} to dst {}; the cuda backend casts between f32 "
                           "and bf16/f16 only",
                           src.describe(), dst.describe()));
  }
  check.same_layout("dst", dst, "src", src);
}

void validate_scale(const Tensor& t) {
  const KernelCheck check(Op::scale);
  check.usable_image("t", t).float_dtype("t", t);
}

void validate_check_finite(const Tensor& flag, const Tensor& t) {
  const KernelCheck check(Op::check_finite);
  check.usable_image("flag", flag).usable_image("t", t).dtype("flag", flag, DType::i32);
  if (flag.numel() != 1) check.fail(fmt::format("flag is {} but must have one element", flag.describe()));
  if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16) {
    check.fail(fmt::format("t is {} but must be f32, bf16 or f16", t.describe()));
  }
}

kernels::RowsClasses validate_softmax_xent_forward(const Tensor& probs, const Tensor& stats,
                                                   const Tensor& logits, const Tensor& labels,
                                                   float label_smoothing) {
  const KernelCheck check(Op::softmax_xent_forward);
  check.usable_image("probs", probs).usable_image("stats", stats).usable_image("logits", logits).usable_image("labels", labels);
  check.dtype("logits", logits, DType::f32).dtype("probs", probs, DType::f32);
  check.dtype("stats", stats, DType::f32).dtype("labels", labels, DType::i32);
  check.rank("logits", logits, 2).same_shape("probs", probs, "logits", logits);
  check.shape("labels", labels, {logits.dim(0)}).shape("stats", stats, {2});
  check.row_major("logits", logits).row_major("probs", probs);
  check_smoothing(check, label_smoothing);
  const kernels::RowsClasses rc{logits.dim(0), logits.dim(1)};
  if (rc.classes == 0) check.fail(fmt::format("logits {} has no classes", logits.describe()));
  if (rc.classes > INT32_MAX || rc.rows > INT32_MAX) {
    check.fail(fmt::format("logits {} is too large: the kernel takes at most 2^31 - 1 rows and "
                           "classes",
                           logits.describe()));
  }
  return rc;
}

kernels::RowsClasses validate_softmax_xent_backward(const Tensor& dlogits, const Tensor& probs,
                                                    const Tensor& labels, float label_smoothing) {
  const KernelCheck check(Op::softmax_xent_backward);
  check.usable_image("dlogits", dlogits).usable_image("probs", probs).usable_image("labels", labels);
  check.dtype("dlogits", dlogits, DType::f32).dtype("probs", probs, DType::f32);
  check.dtype("labels", labels, DType::i32);
  check.rank("probs", probs, 2).same_shape("dlogits", dlogits, "probs", probs);
  check.shape("labels", labels, {probs.dim(0)});
  check.row_major("probs", probs).row_major("dlogits", dlogits);
  check_smoothing(check, label_smoothing);
  return {probs.dim(0), probs.dim(1)};
}

void validate_sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                         const SgdStep& step) {
  const KernelCheck check(Op::sgd_update);
  check.usable_image("param", param).usable_image("grad", grad);
  check.dtype("param", param, DType::f32).dtype("grad", grad, DType::f32);
  check.same_shape("grad", grad, "param", param).same_layout("grad", grad, "param", param);
  if (step.momentum == 0.0f) return;
  check.usable_image("momentum (required when momentum != 0)", momentum)
      .dtype("momentum", momentum, DType::f32)
      .same_shape("momentum", momentum, "param", param)
      .same_layout("momentum", momentum, "param", param);
}

void validate_adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                          const Tensor& grad, const AdamStep& step) {
  const KernelCheck check(Op::adam_update);
  check.usable_image("param", param).usable_image("m", m).usable_image("v", v).usable_image("grad", grad);
  check.dtype("param", param, DType::f32).dtype("m", m, DType::f32);
  check.dtype("v", v, DType::f32).dtype("grad", grad, DType::f32);
  check.same_shape("m", m, "param", param).same_shape("v", v, "param", param);
  check.same_shape("grad", grad, "param", param);
  check.same_layout("m", m, "param", param).same_layout("v", v, "param", param);
  check.same_layout("grad", grad, "param", param);
  if (step.step < 1) {
    check.fail(fmt::format("step = {} but Adam's step count is 1-based; pass the number of "
                           "updates including this one",
                           step.step));
  }
}

kernels::ImageGeometry validate_global_avgpool_forward(const Tensor& y, const Tensor& x) {
  const KernelCheck check(Op::global_avgpool_forward);
  check.usable_image("y", y).usable_image("x", x).float_dtype("x", x).rank("x", x, 4).dtype("y", y, x.dtype());
  check.shape("y", y, {x.dim(0), x.dim(1)}).row_major("y", y);
  const std::int64_t hw = x.dim(2) * x.dim(3);
  if (hw == 0) check.fail(fmt::format("x {} has an empty spatial extent", x.describe()));
  return {x.dim(0), x.dim(1), hw, x.layout()};
}

kernels::ImageGeometry validate_global_avgpool_backward(const Tensor& dx, const Tensor& dy) {
  const KernelCheck check(Op::global_avgpool_backward);
  check.usable_image("dx", dx).usable_image("dy", dy).float_dtype("dy", dy).rank("dx", dx, 4);
  check.dtype("dx", dx, dy.dtype()).shape("dy", dy, {dx.dim(0), dx.dim(1)}).row_major("dy", dy);
  return {dx.dim(0), dx.dim(1), dx.dim(2) * dx.dim(3), dx.layout()};
}

kernels::ChannelAffine validate_normalize_image(const Tensor& dst, const Tensor& src,
                                                const ImageNormalize& norm) {
  const KernelCheck check(Op::normalize_image);
  check.usable_image("dst", dst).usable_image("src", src).float_dtype("dst", dst).dtype("src", src, DType::u8);
  check.rank("src", src, 4).row_major("src", src);
  if (src.dim(3) != 3) check.fail(fmt::format("src is {} but must be (N, H, W, 3)", src.describe()));
  check.shape("dst", dst, {src.dim(0), 3, src.dim(1), src.dim(2)});
  kernels::ChannelAffine affine;
  for (int c = 0; c < 3; ++c) {
    if (!(norm.std[c] > 0.0f)) check.fail(fmt::format("std[{}] = {} must be positive", c, norm.std[c]));
    affine.scale[c] = 1.0f / (255.0f * norm.std[c]);
    affine.shift[c] = -norm.mean[c] / norm.std[c];
  }
  return affine;
}

}  // namespace kiln::cuda
