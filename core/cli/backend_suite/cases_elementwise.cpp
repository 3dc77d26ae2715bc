// Conformance cases of the element-wise ops: the four activations forward (also in place) and
// backward (overwrite and accumulate), add_relu in both image layouts, dropout (mask bits exact
// against kiln/rng.hpp's formula), add (also aliased), cast (exact round-to-nearest-even),
// scale, and check_finite's flag rule (set on inf/NaN, never cleared).
//
// Every tensor is in the compute dtype except dropout's u8 mask, check_finite's i32 flag and
// cast's f32 side.
#include <cmath>
#include <limits>
#include <string>

#include "harness.hpp"
#include "reference.hpp"

namespace kiln::conformance {
namespace {

constexpr Activation kActivations[] = {Activation::relu, Activation::tanh, Activation::sigmoid, Activation::gelu};

std::string act_label(Activation a) { return std::string(activation_name(a)); }

void activation_forward_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{7, 33};
  Rng rng(3);
  for (const Activation act : kActivations) {
    const auto x = uniform(rng, 7 * 33, -3, 3, d);
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = ref::activation(act, x[i]);

    const Tensor y = poisoned(shape, d);
    backend().activation_forward(y, upload(x, shape, d), act);
    expect_close(fetch(y), want, tolerance(d), "y = " + act_label(act) + "(x)");

    const Tensor inplace = upload(x, shape, d);
    backend().activation_forward(inplace, inplace, act);
    expect_close(fetch(inplace), want, tolerance(d), "in-place " + act_label(act));
  }
}

void activation_backward_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{5, 41};
  const std::size_t n = 5 * 41;
  Rng rng(4);
  for (const Activation act : kActivations) {
    const auto x = uniform(rng, n, -3, 3, d);
    const auto dy = uniform(rng, n, -1, 1, d);
    std::vector<double> y(n);
    for (std::size_t i = 0; i < n; ++i) y[i] = round_to(d, ref::activation(act, x[i]));
    const Tensor x_t = upload(x, shape, d), y_t = upload(y, shape, d), dy_t = upload(dy, shape, d);

    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = dy[i] * ref::activation_derivative(act, x[i]);
    const Tensor dx = poisoned(shape, d);
    backend().activation_backward(dx, dy_t, x_t, y_t, act, Accumulate::no);
    expect_close(fetch(dx), want, tolerance(d), "dx " + act_label(act) + " (overwrite)");

    const auto dx0 = uniform(rng, n, -1, 1, d);
    for (std::size_t i = 0; i < n; ++i) want[i] += dx0[i];
    const Tensor dx_acc = upload(dx0, shape, d);
    backend().activation_backward(dx_acc, dy_t, x_t, y_t, act, Accumulate::yes);
    expect_close(fetch(dx_acc), want, tolerance(d), "dx " + act_label(act) + " (accumulate)");
  }
}

void add_relu_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{2, 5, 4, 3};
  Rng rng(5);
  const auto x = uniform(rng, 120, -2, 2, d);
  const auto r = uniform(rng, 120, -2, 2, d);
  std::vector<double> want(120);
  for (std::size_t i = 0; i < 120; ++i) want[i] = ref::activation(Activation::relu, x[i] + r[i]);
  const Tensor y = poisoned(shape, d, v.layout);
  backend().add_relu_forward(y, upload(x, shape, d, v.layout), upload(r, shape, d, v.layout));
  expect_close(fetch(y), want, tolerance(d), "y = relu(x + residual)");
}

void dropout_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{9, 37};
  const std::size_t n = 9 * 37;
  const float p = 0.3f;
  const std::uint64_t seed = 0x5eed1234abcdull;
  Rng rng(6);
  const auto x = uniform(rng, n, -1, 1, d);
  std::vector<double> mask(n), want(n);
  for (std::size_t i = 0; i < n; ++i) {
    mask[i] = ref::dropout_keep(seed, static_cast<std::int64_t>(i), p) ? 1.0 : 0.0;
    want[i] = x[i] * mask[i] / (1.0 - double{p});
  }
  const Tensor y = poisoned(shape, d);
  const Tensor mask_t = poisoned(shape, DType::u8);
  backend().dropout_forward(y, mask_t, upload(x, shape, d), p, seed);
  expect_equal(fetch(mask_t), mask, "mask");
  expect_close(fetch(y), want, tolerance(d), "y = x * mask / (1 - p)");

  const auto dy = uniform(rng, n, -1, 1, d);
  for (std::size_t i = 0; i < n; ++i) want[i] = dy[i] * mask[i] / (1.0 - double{p});
  const Tensor dx = poisoned(shape, d);
  backend().dropout_backward(dx, upload(dy, shape, d), upload(mask, shape, DType::u8), p);
  expect_close(fetch(dx), want, tolerance(d), "dx = dy * mask / (1 - p)");
}

void add_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{3, 4, 5, 7};
  Rng rng(7);
  const auto a = uniform(rng, 420, -1, 1, d);
  const auto b = uniform(rng, 420, -1, 1, d);
  std::vector<double> want(420);
  for (std::size_t i = 0; i < 420; ++i) want[i] = a[i] + b[i];
  const Tensor c = poisoned(shape, d);
  backend().add(c, upload(a, shape, d), upload(b, shape, d));
  expect_close(fetch(c), want, tolerance(d), "c = a + b");
  const Tensor a_t = upload(a, shape, d);
  backend().add(a_t, a_t, upload(b, shape, d));
  expect_close(fetch(a_t), want, tolerance(d), "a = a + b (aliased)");
}

void cast_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{6, 29};
  const std::size_t n = 6 * 29;
  Rng rng(8);
  // f32 values that are not representable in the 16-bit types, a few tiny ones (f16 subnormals).
  auto wide = uniform(rng, n, -60, 60, DType::f32);
  for (std::size_t i = 0; i < n; i += 17) wide[i] *= 1e-6;
  const Tensor narrow = poisoned(shape, d);
  backend().cast(narrow, upload(wide, shape, DType::f32));
  expect_equal(fetch(narrow), rounded(d, wide), "f32 -> " + std::string(dtype_name(d)) + " (round to nearest even)");

  const auto small = uniform(rng, n, -60, 60, d);
  const Tensor back = poisoned(shape, DType::f32);
  backend().cast(back, upload(small, shape, d));
  expect_equal(fetch(back), small, std::string(dtype_name(d)) + " -> f32");
}

void scale_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{11, 23};
  Rng rng(9);
  const auto x = uniform(rng, 253, -4, 4, d);
  std::vector<double> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = -0.75 * x[i];
  const Tensor t = upload(x, shape, d);
  backend().scale(t, -0.75f);
  expect_close(fetch(t), want, tolerance(d), "t *= -0.75");
}

void check_finite_case(const Variant& v) {
  const DType d = v.dtype;
  const Shape shape{4, 50};
  Rng rng(10);
  const auto finite = uniform(rng, 200, -100, 100, d);
  const auto run = [&](const std::vector<double>& values, double flag_before, double flag_after,
                       const std::string& what) {
    const Tensor flag = upload({flag_before}, {1}, DType::i32);
    backend().check_finite(flag, upload(values, shape, d));
    expect_equal(fetch(flag), {flag_after}, what);
  };
  run(finite, 0, 0, "flag stays 0 for finite values");
  run(finite, 1, 1, "flag stays 1 (never cleared)");
  auto with_inf = finite;
  with_inf[137] = -std::numeric_limits<double>::infinity();
  run(with_inf, 0, 1, "flag set by -inf at [137]");
  auto with_nan = finite;
  with_nan[3] = std::numeric_limits<double>::quiet_NaN();
  run(with_nan, 0, 1, "flag set by NaN at [3]");
}

}  // namespace

void add_elementwise_cases(CaseList& cases) {
  cases.add("activation_forward", {Op::activation_forward}, Axes::dtypes, activation_forward_case);
  cases.add("activation_backward", {Op::activation_backward}, Axes::dtypes, activation_backward_case);
  cases.add("add_relu_forward", {Op::add_relu_forward}, Axes::dtypes_x_layouts, add_relu_case);
  cases.add("dropout", {Op::dropout_forward, Op::dropout_backward}, Axes::dtypes, dropout_case);
  cases.add("add", {Op::add}, Axes::dtypes, add_case);
  cases.add("cast", {Op::cast}, Axes::dtypes, cast_case);
  cases.add("scale", {Op::scale}, Axes::dtypes, scale_case);
  cases.add("check_finite", {Op::check_finite}, Axes::dtypes, check_finite_case);
}

}  // namespace kiln::conformance
