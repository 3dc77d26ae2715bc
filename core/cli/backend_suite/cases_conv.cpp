// Conformance cases of conv2d: forward, backward-data and backward-filter (overwrite and
// accumulate) for the shapes ResNet uses (3x3 s1 p1, the 7x7 s2 p3 stem, 1x1 s2 downsample)
// plus dilation with a rectangular kernel and unequal strides, grouped and depthwise filters.
//
// x, y, dx, dy carry the variant's layout (nchw or nhwc) and the compute dtype; w is OIHW in the
// compute dtype (the layer's compute copy); dw is the f32 master gradient, as Conv2d uses it.
// The nhwc variant of the first shape also writes y in the other layout (mixed layouts are
// allowed by the contract).
#include <string>

#include "harness.hpp"
#include "reference.hpp"

namespace kiln::conformance {
namespace {

Conv2dDesc conv(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t r,
                std::int64_t s, std::int64_t stride, std::int64_t pad, std::int64_t groups = 1) {
  Conv2dDesc d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.k = k, d.r = r, d.s = s;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.groups = groups;
  return d;
}

Layout other(Layout l) { return l == Layout::nhwc ? Layout::row_major : Layout::nhwc; }

void conv_case(Conv2dDesc d, bool mixed_layouts, const Variant& v) {
  const DType dt = v.dtype;
  d.dtype = dt;
  const Shape xs{d.n, d.c, d.h, d.w}, ys{d.n, d.k, d.out_h(), d.out_w()}, ws{d.k, d.c / d.groups, d.r, d.s};
  const auto count = [](const Shape& s) { return static_cast<std::size_t>(shape_numel(s)); };
  Rng rng(static_cast<std::uint64_t>(d.c * 1000 + d.k * 10 + d.r));
  const auto x = uniform(rng, count(xs), -1, 1, dt);
  const auto w = uniform(rng, count(ws), -1, 1, dt);
  const auto dy = uniform(rng, count(ys), -1, 1, dt);
  const Tensor x_t = upload(x, xs, dt, v.layout), w_t = upload(w, ws, dt), dy_t = upload(dy, ys, dt, v.layout);
  const auto plan = backend().plan_conv2d(d);
  const double tol = tolerance(dt);

  const auto y_want = ref::conv2d_forward(d, x, w);
  const Tensor y = poisoned(ys, dt, v.layout);
  backend().conv2d_forward(*plan, y, x_t, w_t);
  expect_close(fetch(y), y_want, tol, "y (forward)");
  if (mixed_layouts) {
    const Tensor y_other = poisoned(ys, dt, other(v.layout));
    backend().conv2d_forward(*plan, y_other, x_t, w_t);
    expect_close(fetch(y_other), y_want, tol, std::string("y in ") + layout_label(other(v.layout)) + " (forward)");
  }

  const Tensor dx = poisoned(xs, dt, v.layout);
  backend().conv2d_backward_data(*plan, dx, dy_t, w_t);
  expect_close(fetch(dx), ref::conv2d_backward_data(d, dy, w), tol, "dx (backward data)");

  const Tensor dw = poisoned(ws, DType::f32);
  backend().conv2d_backward_filter(*plan, dw, dy_t, x_t, Accumulate::no);
  expect_close(fetch(dw), ref::conv2d_backward_filter(d, dy, x, {}, Accumulate::no), tol,
               "f32 dw (backward filter, overwrite)");
  const auto dw0 = uniform(rng, count(ws), -1, 1, DType::f32);
  const Tensor dw_acc = upload(dw0, ws, DType::f32);
  backend().conv2d_backward_filter(*plan, dw_acc, dy_t, x_t, Accumulate::yes);
  expect_close(fetch(dw_acc), ref::conv2d_backward_filter(d, dy, x, dw0, Accumulate::yes), tol,
               "f32 dw (backward filter, accumulate)");
}

Conv2dDesc dilated() {
  Conv2dDesc d = conv(2, 4, 11, 10, 6, 3, 2, 1, 0);
  d.stride_h = 1, d.stride_w = 2;
  d.pad_h = 2, d.pad_w = 1;
  d.dilation_h = 2, d.dilation_w = 1;
  return d;
}

void add(CaseList& cases, const std::string& name, Conv2dDesc d, bool mixed = false) {
  cases.add("conv2d_" + name, {Op::conv2d_forward, Op::conv2d_backward_data, Op::conv2d_backward_filter},
            Axes::dtypes_x_layouts, [d, mixed](const Variant& v) { conv_case(d, mixed && v.layout == Layout::nhwc, v); });
}

}  // namespace

void add_conv_cases(CaseList& cases) {
  add(cases, "3x3_s1_p1", conv(2, 6, 9, 9, 8, 3, 3, 1, 1), /*mixed=*/true);
  add(cases, "7x7_s2_p3_stem", conv(2, 3, 16, 16, 8, 7, 7, 2, 3));
  add(cases, "1x1_s2_downsample", conv(2, 8, 8, 8, 12, 1, 1, 2, 0));
  add(cases, "3x2_dilated_strided", dilated());
  add(cases, "3x3_groups4", conv(2, 8, 7, 7, 12, 3, 3, 1, 1, 4));
  add(cases, "3x3_s2_depthwise", conv(2, 6, 9, 9, 6, 3, 3, 2, 1, 6));
}

}  // namespace kiln::conformance
