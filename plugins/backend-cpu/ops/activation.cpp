// Activations forward/backward (relu, tanh, sigmoid, gelu) and add_relu_forward, f32.
//
// gelu is the tanh approximation (PyTorch's gelu(approximate="tanh"), GPT-2's):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// not the erf form; it is within ~1e-3 of it. Backward derivatives are taken from y = act(x) where
// that is exact (relu: y > 0, tanh: 1 - y^2, sigmoid: y (1 - y)), so those need only y and x may
// be undefined (in-place forward); gelu needs x and ignores y. relu keeps NaN (x < 0 ? 0 : x), so
// a diverging run is still caught by check_finite.
#include <cmath>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

inline float gelu(float x) {
  const float t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * x * (1.0f + t);
}

inline float gelu_grad(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = std::tanh(inner);
  const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}

/// dx (+)= dy * grad(i), with the accumulate branch hoisted out of the loop.
template <class Grad>
void backward_loop(float* dx, const float* dy, std::int64_t n, Accumulate acc, Grad grad) {
  if (acc == Accumulate::yes) {
    parallel_for(n, [&](std::int64_t i) { dx[i] += dy[i] * grad(i); });
  } else {
    parallel_for(n, [&](std::int64_t i) { dx[i] = dy[i] * grad(i); });
  }
}

}  // namespace

void CpuBackend::activation_forward(const Tensor& y, const Tensor& x, Activation act) {
  const OpCheck check(Op::activation_forward);
  check.usable("y", y).usable("x", x).dtype("y", y, DType::f32).dtype("x", x, DType::f32);
  check.same_shape("y", y, "x", x);
  float* out = y.data_as<float>();
  const float* in = x.data_as<float>();
  const std::int64_t n = x.numel();
  use_our_threads();
  switch (act) {
    case Activation::relu:
      parallel_for(n, [&](std::int64_t i) { out[i] = in[i] < 0.0f ? 0.0f : in[i]; });
      return;
    case Activation::tanh:
      parallel_for(n, [&](std::int64_t i) { out[i] = std::tanh(in[i]); });
      return;
    case Activation::sigmoid:
      parallel_for(n, [&](std::int64_t i) { out[i] = 1.0f / (1.0f + std::exp(-in[i])); });
      return;
    case Activation::gelu:
      parallel_for(n, [&](std::int64_t i) { out[i] = gelu(in[i]); });
      return;
  }
  check.fail(fmt::format("unknown activation {}", static_cast<int>(act)));
}

void CpuBackend::activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                     const Tensor& y, Activation act, Accumulate acc) {
  const OpCheck check(Op::activation_backward);
  check.usable("dx", dx).usable("dy", dy).dtype("dx", dx, DType::f32).dtype("dy", dy, DType::f32);
  check.same_shape("dx", dx, "dy", dy);
  const bool needs_x = act == Activation::gelu;
  const Tensor& saved = needs_x ? x : y;
  check.usable(needs_x ? "x (gelu's backward reads x)" : "y (its backward reads y = act(x))", saved)
      .dtype(needs_x ? "x" : "y", saved, DType::f32)
      .same_shape(needs_x ? "x" : "y", saved, "dy", dy);
  if (!needs_x && x.defined()) check.same_shape("x", x, "dy", dy);
  if (needs_x && y.defined()) check.same_shape("y", y, "dy", dy);
  float* out = dx.data_as<float>();
  const float* g = dy.data_as<float>();
  const float* s = saved.data_as<float>();
  const std::int64_t n = dy.numel();
  use_our_threads();
  switch (act) {
    case Activation::relu:
      backward_loop(out, g, n, acc, [s](std::int64_t i) { return s[i] > 0.0f ? 1.0f : 0.0f; });
      return;
    case Activation::tanh:
      backward_loop(out, g, n, acc, [s](std::int64_t i) { return 1.0f - s[i] * s[i]; });
      return;
    case Activation::sigmoid:
      backward_loop(out, g, n, acc, [s](std::int64_t i) { return s[i] * (1.0f - s[i]); });
      return;
    case Activation::gelu:
      backward_loop(out, g, n, acc, [s](std::int64_t i) { return gelu_grad(s[i]); });
      return;
  }
  check.fail(fmt::format("unknown activation {}", static_cast<int>(act)));
}

void CpuBackend::add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) {
  const OpCheck check(Op::add_relu_forward);
  check.usable("y", y).usable("x", x).usable("residual", residual);
  check.dtype("y", y, DType::f32).dtype("x", x, DType::f32).dtype("residual", residual, DType::f32);
  check.same_shape("x", x, "y", y).same_shape("residual", residual, "y", y);
  float* out = y.data_as<float>();
  const float* a = x.data_as<float>();
  const float* r = residual.data_as<float>();
  use_our_threads();
  parallel_for(y.numel(), [&](std::int64_t i) {
    const float v = a[i] + r[i];
    out[i] = v < 0.0f ? 0.0f : v;
  });
}

}  // namespace kiln::cpu
