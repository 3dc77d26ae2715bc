// Shared argument checks of the element-wise ops (kiln/sdk/op_args.hpp). Element-wise ops pair
// operands by memory position, so every image operand of one call must share a layout.
#include <fmt/format.h>

#include "kiln/sdk/op_args.hpp"

namespace kiln::sdk {
namespace {

void known_activation(const OpCheck& check, Activation act) {
  if (static_cast<int>(act) > static_cast<int>(Activation::gelu)) {
    check.fail(fmt::format("unknown activation {}", static_cast<int>(act)));
  }
}

void probability(const OpCheck& check, float p) {
  // p == 1 would divide by zero in the 1 / (1 - p) scaling.
  if (!(p >= 0.0f && p < 1.0f)) {
    check.fail(fmt::format("p = {} is outside [0, 1); set the model's dropout to a probability "
                           "below 1",
                           p));
  }
}

bool castable(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }

}  // namespace

void check_activation_forward(const OpCheck& check, const Tensor& y, const Tensor& x, Activation act) {
  check.usable_image("y", y).usable_image("x", x).float_dtype("x", x).dtype("y", y, x.dtype());
  check.same_shape("y", y, "x", x).same_layout("y", y, "x", x);
  known_activation(check, act);
}

const Tensor& check_activation_backward(const OpCheck& check, const Tensor& dx, const Tensor& dy,
                                        const Tensor& x, const Tensor& y, Activation act) {
  check.usable_image("dx", dx).usable_image("dy", dy).float_dtype("dy", dy).dtype("dx", dx, dy.dtype());
  check.same_shape("dx", dx, "dy", dy).same_layout("dx", dx, "dy", dy);
  known_activation(check, act);
  // relu/tanh/sigmoid derive exactly from y (x may be gone after an in-place forward); gelu
  // needs x.
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

void check_add_relu_forward(const OpCheck& check, const Tensor& y, const Tensor& x, const Tensor& residual) {
  check.usable_image("y", y).usable_image("x", x).usable_image("residual", residual);
  check.float_dtype("y", y).dtype("x", x, y.dtype()).dtype("residual", residual, y.dtype());
  check.same_shape("x", x, "y", y).same_shape("residual", residual, "y", y);
  check.same_layout("x", x, "y", y).same_layout("residual", residual, "y", y);
}

void check_dropout_forward(const OpCheck& check, const Tensor& y, const Tensor& mask, const Tensor& x, float p) {
  check.usable_image("y", y).usable_image("mask", mask).usable_image("x", x);
  check.float_dtype("x", x).dtype("y", y, x.dtype()).dtype("mask", mask, DType::u8);
  check.same_shape("y", y, "x", x).same_numel("mask", mask, "x", x);
  check.same_layout("y", y, "x", x).same_layout("mask", mask, "x", x);
  probability(check, p);
}

void check_dropout_backward(const OpCheck& check, const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  check.usable_image("dx", dx).usable_image("dy", dy).usable_image("mask", mask);
  check.float_dtype("dy", dy).dtype("dx", dx, dy.dtype()).dtype("mask", mask, DType::u8);
  check.same_shape("dx", dx, "dy", dy).same_numel("mask", mask, "dy", dy);
  check.same_layout("dx", dx, "dy", dy).same_layout("mask", mask, "dy", dy);
  probability(check, p);
}

void check_add(const OpCheck& check, const Tensor& c, const Tensor& a, const Tensor& b) {
  check.usable_image("c", c).usable_image("a", a).usable_image("b", b);
  check.float_dtype("c", c).dtype("a", a, c.dtype()).dtype("b", b, c.dtype());
  check.same_shape("a", a, "c", c).same_shape("b", b, "c", c);
  check.same_layout("a", a, "c", c).same_layout("b", b, "c", c);
}

void check_cast(const OpCheck& check, const Tensor& dst, const Tensor& src) {
  check.usable_image("dst", dst).usable_image("src", src).same_numel("dst", dst, "src", src);
  if (!castable(dst.dtype()) || !castable(src.dtype()) ||
      (dst.dtype() != DType::f32 && src.dtype() != DType::f32 && dst.dtype() != src.dtype())) {
    check.fail(fmt::format("cannot convert src {} to dst {}; cast converts between f32 and "
                           "bf16/f16 only",
                           src.describe(), dst.describe()));
  }
  check.same_layout("dst", dst, "src", src);
}

void check_scale(const OpCheck& check, const Tensor& t) { check.usable_image("t", t).float_dtype("t", t); }

void check_check_finite(const OpCheck& check, const Tensor& flag, const Tensor& t) {
  check.usable("flag", flag).usable_image("t", t).dtype("flag", flag, DType::i32);
  if (flag.numel() != 1) check.fail(fmt::format("flag is {} but must have one element", flag.describe()));
  check.float_dtype("t", t);
}

void check_convert_layout(const OpCheck& check, const Tensor& dst, const Tensor& src) {
  check.usable_image("dst", dst).usable_image("src", src).rank("src", src, 4);
  check.float_dtype("src", src).dtype("dst", dst, src.dtype()).same_shape("dst", dst, "src", src);
  if (dst.data() == src.data() && dst.bytes() > 0) {
    check.fail(fmt::format("dst {} and src {} are the same memory; rearranging in place would read "
                           "elements already overwritten, so give dst its own buffer",
                           dst.describe(), src.describe()));
  }
}

}  // namespace kiln::sdk
