// Shared argument checks of the image ops that take whole activations: the planned convolution
// and pooling calls (whose descriptors op_descs.cpp checks at plan time), global average pooling
// and image normalisation (kiln/sdk/op_args.hpp).
#include <fmt/format.h>

#include "kiln/sdk/op_args.hpp"

namespace kiln::sdk {
namespace {

Shape conv_x(const Conv2dDesc& d) { return {d.n, d.c, d.h, d.w}; }
Shape conv_w(const Conv2dDesc& d) { return {d.k, d.c / d.groups, d.r, d.s}; }
Shape conv_y(const Conv2dDesc& d) { return {d.n, d.k, d.out_h(), d.out_w()}; }

/// A convolution operand of `shape` in f32 (master weights, f32 outputs) or the plan's dtype.
void conv_operand(const OpCheck& check, const Conv2dDesc& d, const char* name, const Tensor& t,
                  const Shape& shape, bool image) {
  if (image) {
    check.usable_image(name, t);
  } else {
    check.usable(name, t);  // weights are OIHW row-major, the checkpoint layout
  }
  check.shape(name, t, shape);
  if (t.dtype() != DType::f32 && t.dtype() != d.dtype) {
    check.fail(fmt::format("{} is {} but must be f32 or the plan's {}", name, t.describe(),
                           dtype_name(d.dtype)));
  }
}

/// A pooling operand in the plan's dtype and `shape`, in `ref`'s layout unless mixing is allowed.
void pool_operand(const OpCheck& check, const Pool2dDesc& d, MixedLayouts mixed, const char* name,
                  const Tensor& t, const Shape& shape, const char* ref_name, const Tensor& ref) {
  check.usable_image(name, t).dtype(name, t, d.dtype).shape(name, t, shape);
  if (mixed == MixedLayouts::refused) check.same_layout(name, t, ref_name, ref);
}

}  // namespace

void check_conv2d_forward(const OpCheck& check, const Conv2dDesc& d, const Tensor& y, const Tensor& x,
                          const Tensor& w) {
  conv_operand(check, d, "y", y, conv_y(d), true);
  conv_operand(check, d, "x", x, conv_x(d), true);
  conv_operand(check, d, "w", w, conv_w(d), false);
}

void check_conv2d_backward_data(const OpCheck& check, const Conv2dDesc& d, const Tensor& dx,
                                const Tensor& dy, const Tensor& w) {
  conv_operand(check, d, "dx", dx, conv_x(d), true);
  conv_operand(check, d, "dy", dy, conv_y(d), true);
  conv_operand(check, d, "w", w, conv_w(d), false);
}

void check_conv2d_backward_filter(const OpCheck& check, const Conv2dDesc& d, const Tensor& dw,
                                  const Tensor& dy, const Tensor& x) {
  conv_operand(check, d, "dw", dw, conv_w(d), false);
  conv_operand(check, d, "dy", dy, conv_y(d), true);
  conv_operand(check, d, "x", x, conv_x(d), true);
}

void check_pool2d_forward(const OpCheck& check, const Pool2dDesc& d, MixedLayouts mixed, const Tensor& y,
                          const Tensor& x) {
  const Shape in{d.n, d.c, d.h, d.w}, out{d.n, d.c, d.out_h(), d.out_w()};
  pool_operand(check, d, mixed, "x", x, in, "x", x);
  pool_operand(check, d, mixed, "y", y, out, "x", x);
}

void check_pool2d_backward(const OpCheck& check, const Pool2dDesc& d, MixedLayouts mixed, const Tensor& dx,
                           const Tensor& dy, const Tensor& x, const Tensor& y) {
  const Shape in{d.n, d.c, d.h, d.w}, out{d.n, d.c, d.out_h(), d.out_w()};
  pool_operand(check, d, mixed, "dy", dy, out, "dy", dy);
  pool_operand(check, d, mixed, "dx", dx, in, "dy", dy);
  if (d.kind == Pool2dDesc::Kind::max && (!x.defined() || !y.defined())) {
    check.fail(fmt::format("{}: x and y of the forward are required; max pooling routes the "
                           "gradient to the forward's argmax",
                           describe(d)));
  }
  if (x.defined()) pool_operand(check, d, mixed, "x", x, in, "dy", dy);
  if (y.defined()) pool_operand(check, d, mixed, "y", y, out, "dy", dy);
}

void check_global_avgpool_forward(const OpCheck& check, const Tensor& y, const Tensor& x) {
  check.usable_image("x", x).float_dtype("x", x).rank("x", x, 4);
  check.usable("y", y).dtype("y", y, x.dtype()).shape("y", y, {x.dim(0), x.dim(1)});
  // The mean over an empty plane is 0/0.
  if (x.dim(2) * x.dim(3) == 0) check.fail(fmt::format("x {} has an empty spatial extent", x.describe()));
}

void check_global_avgpool_backward(const OpCheck& check, const Tensor& dx, const Tensor& dy) {
  check.usable_image("dx", dx).rank("dx", dx, 4).usable("dy", dy).float_dtype("dy", dy);
  check.dtype("dx", dx, dy.dtype()).shape("dy", dy, {dx.dim(0), dx.dim(1)});
}

void check_normalize_image(const OpCheck& check, const Tensor& dst, const Tensor& src,
                           const ImageNormalize& norm) {
  check.usable_image("dst", dst).float_dtype("dst", dst).usable("src", src).dtype("src", src, DType::u8);
  check.rank("src", src, 4);
  if (src.dim(3) != 3) check.fail(fmt::format("src is {} but must be (N, H, W, 3)", src.describe()));
  check.shape("dst", dst, {src.dim(0), 3, src.dim(1), src.dim(2)});
  for (int c = 0; c < 3; ++c) {
    // A zero std would turn every pixel of the channel into inf.
    if (!(norm.std[c] > 0.0f)) check.fail(fmt::format("std[{}] = {} must be positive", c, norm.std[c]));
  }
}

}  // namespace kiln::sdk
