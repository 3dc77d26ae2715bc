// Activations forward/backward (relu, tanh, sigmoid, gelu) and add_relu_forward; f32, bf16 and
// f16 tensors (all operands of one call share the dtype; math in f32, see elem.hpp).
//
// gelu is the tanh approximation (PyTorch's gelu(approximate="tanh"), GPT-2's):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// not the erf form; it is within ~1e-3 of it. Backward derivatives are taken from y = act(x) where
// that is exact (relu: y > 0, tanh: 1 - y^2, sigmoid: y (1 - y)), so those need only y and x may
// be undefined (in-place forward); gelu needs x and ignores y. relu keeps NaN (x < 0 ? 0 : x), so
// a diverging run is still caught by check_finite.
#include <cmath>

#include "cpu_backend.hpp"
#include "ops/elem.hpp"
#include "ops/f16_rows.hpp"
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

/// dx (+)= dy * grad(saved), with the accumulate branch hoisted out of the loop.
template <class E, class Grad>
void backward_loop(typename E::T* dx, const typename E::T* dy, const typename E::T* saved, std::int64_t n,
                   Accumulate acc, Grad grad) {
  if (acc == Accumulate::yes) {
    map_elements<E>(n, dx, [&](float d, float g, float s) { return d + g * grad(s); }, dx, dy, saved);
  } else {
    map_elements<E>(n, dx, [&](float g, float s) { return g * grad(s); }, dy, saved);
  }
}

template <class E>
void forward_loop(typename E::T* out, const typename E::T* in, std::int64_t n, Activation act) {
  switch (act) {
    case Activation::relu:
      map_elements<E>(n, out, [](float v) { return v < 0.0f ? 0.0f : v; }, in);
      return;
    case Activation::tanh:
      map_elements<E>(n, out, [](float v) { return std::tanh(v); }, in);
      return;
    case Activation::sigmoid:
      map_elements<E>(n, out, [](float v) { return 1.0f / (1.0f + std::exp(-v)); }, in);
      return;
    case Activation::gelu:
      map_elements<E>(n, out, [](float v) { return gelu(v); }, in);
      return;
  }
}

}  // namespace

void CpuBackend::activation_forward(const Tensor& y, const Tensor& x, Activation act) {
  sdk::check_activation_forward(OpCheck(Op::activation_forward), y, x, act);
  use_our_threads();
  with_float_dtype(x.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    forward_loop<E>(static_cast<T*>(y.data()), static_cast<const T*>(x.data()), x.numel(), act);
  });
}

void CpuBackend::activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                     const Tensor& y, Activation act, Accumulate acc) {
  const OpCheck check(Op::activation_backward);
  const Tensor& saved = sdk::check_activation_backward(check, dx, dy, x, y, act);  // x or y
  const std::int64_t n = dy.numel();
  use_our_threads();
  with_float_dtype(dy.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(dx.data());
    const T* g = static_cast<const T*>(dy.data());
    const T* s = static_cast<const T*>(saved.data());
    switch (act) {
      case Activation::relu:
        backward_loop<E>(out, g, s, n, acc, [](float v) { return v > 0.0f ? 1.0f : 0.0f; });
        return;
      case Activation::tanh:
        backward_loop<E>(out, g, s, n, acc, [](float v) { return 1.0f - v * v; });
        return;
      case Activation::sigmoid:
        backward_loop<E>(out, g, s, n, acc, [](float v) { return v * (1.0f - v); });
        return;
      case Activation::gelu:
        backward_loop<E>(out, g, s, n, acc, [](float v) { return gelu_grad(v); });
        return;
    }
  });
}

void CpuBackend::add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) {
  sdk::check_add_relu_forward(OpCheck(Op::add_relu_forward), y, x, residual);
  use_our_threads();
  with_float_dtype(y.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(y.data());
    const T* a = static_cast<const T*>(x.data());
    const T* r = static_cast<const T*>(residual.data());
    map_elements<E>(
        y.numel(), out,
        [](float u, float v) {
          const float sum = u + v;
          return sum < 0.0f ? 0.0f : sum;
        },
        a, r);
  });
}

}  // namespace kiln::cpu
