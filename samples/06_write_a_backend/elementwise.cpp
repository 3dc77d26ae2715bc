// Element-wise ops: activations forward and backward, relu(x + residual), dropout, add, cast,
// scale, lerp and check_finite.
//
// Each is one loop over the elements in memory order. That is right for image activations in
// either layout as well: the shared checks (kiln/sdk/op_args.hpp) require every image operand of
// one call to carry the same layout tag, so element i of one operand pairs with element i of the
// others wherever it sits logically. Outputs may alias inputs (in-place ReLU, a = a + b): each
// element is read before it is written and no other element is read.
#include <cmath>

#include <kiln/rng.hpp>

#include "naive_backend.hpp"

namespace kiln::naive {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

/// act(x). gelu is the tanh approximation (kiln/ops.hpp), PyTorch's approximate="tanh".
double activate(Activation act, double x) {
  switch (act) {
    case Activation::relu: return x > 0.0 ? x : 0.0;
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::gelu: return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  }
  return NAN;  // not reached: check_activation_forward refuses unknown activations
}

/// act'(x) from `saved`: the forward's output y = act(x) where that is enough (relu, tanh,
/// sigmoid), its input x for gelu, whose derivative has no short form in y. The contract makes
/// the caller pass that one (check_activation_backward returns it); the other may be undefined.
double derivative(Activation act, double saved) {
  switch (act) {
    case Activation::relu: return saved > 0.0 ? 1.0 : 0.0;   // y > 0 exactly where x > 0
    case Activation::tanh: return 1.0 - saved * saved;       // 1 - tanh(x)^2
    case Activation::sigmoid: return saved * (1.0 - saved);  // s(x) (1 - s(x))
    case Activation::gelu: {
      const double x = saved;
      const double u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
      const double t = std::tanh(u);
      const double du_dx = kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx;
    }
  }
  return NAN;
}

/// Dropout's keep decision for element i, the formula every backend shares (kiln/rng.hpp), so
/// a seed drops the same elements on any device.
bool keep(std::uint64_t seed, std::int64_t i, float p) {
  return unit_float(derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
}

}  // namespace

void NaiveBackend::activation_forward(const Tensor& y, const Tensor& x, Activation act) {
  const OpCheck check(Op::activation_forward);
  sdk::check_activation_forward(check, y, x, act);
  require_f32(Op::activation_forward, x.dtype());
  const float* in = floats(x);
  float* out = floats(y);
  for (std::int64_t i = 0; i < x.numel(); ++i) out[i] = static_cast<float>(activate(act, in[i]));
}

void NaiveBackend::activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                                       Activation act, Accumulate acc) {
  const OpCheck check(Op::activation_backward);
  // Returns the tensor the derivative reads (y, or x for gelu).
  const Tensor& saved = sdk::check_activation_backward(check, dx, dy, x, y, act);
  require_f32(Op::activation_backward, dy.dtype());
  const float* saved_data = floats(saved);
  const float* dy_data = floats(dy);
  float* dx_data = floats(dx);
  for (std::int64_t i = 0; i < dy.numel(); ++i) {
    double grad = double{dy_data[i]} * derivative(act, saved_data[i]);
    // An activation gradient is overwritten unless the caller asks to add (a tensor with two
    // consumers, kiln/ops.hpp).
    if (acc == Accumulate::yes) grad += double{dx_data[i]};
    dx_data[i] = static_cast<float>(grad);
  }
}

void NaiveBackend::add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) {
  const OpCheck check(Op::add_relu_forward);
  sdk::check_add_relu_forward(check, y, x, residual);
  require_f32(Op::add_relu_forward, x.dtype());
  const float* x_data = floats(x);
  const float* r_data = floats(residual);
  float* y_data = floats(y);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double sum = double{x_data[i]} + double{r_data[i]};
    y_data[i] = static_cast<float>(sum > 0.0 ? sum : 0.0);
  }
}

void NaiveBackend::dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                                   std::uint64_t seed) {
  const OpCheck check(Op::dropout_forward);
  sdk::check_dropout_forward(check, y, mask, x, p);
  require_f32(Op::dropout_forward, x.dtype());
  const float* x_data = floats(x);
  float* y_data = floats(y);
  std::uint8_t* mask_data = mask.data_as<std::uint8_t>();
  // Kept elements are scaled by 1 / (1 - p) so the layer's expected output is unchanged
  // ("inverted" dropout, as PyTorch); p < 1 is guaranteed by the check.
  const double keep_scale = 1.0 / (1.0 - double{p});
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    mask_data[i] = keep(seed, i, p) ? 1 : 0;  // exactly 0 or 1 (kiln/ops.hpp)
    y_data[i] = static_cast<float>(double{x_data[i]} * mask_data[i] * keep_scale);
  }
}

void NaiveBackend::dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  const OpCheck check(Op::dropout_backward);
  sdk::check_dropout_backward(check, dx, dy, mask, p);
  require_f32(Op::dropout_backward, dy.dtype());
  const float* dy_data = floats(dy);
  const std::uint8_t* mask_data = mask.data_as<std::uint8_t>();
  float* dx_data = floats(dx);
  const double keep_scale = 1.0 / (1.0 - double{p});
  for (std::int64_t i = 0; i < dy.numel(); ++i) {
    dx_data[i] = static_cast<float>(double{dy_data[i]} * mask_data[i] * keep_scale);
  }
}

void NaiveBackend::add(const Tensor& c, const Tensor& a, const Tensor& b) {
  const OpCheck check(Op::add);
  sdk::check_add(check, c, a, b);
  require_f32(Op::add, a.dtype());
  const float* a_data = floats(a);
  const float* b_data = floats(b);
  float* c_data = floats(c);
  for (std::int64_t i = 0; i < c.numel(); ++i) c_data[i] = a_data[i] + b_data[i];  // one rounding already
}

void NaiveBackend::cast(const Tensor& dst, const Tensor& src) {
  const OpCheck check(Op::cast);
  sdk::check_cast(check, dst, src);
  // f32 -> f32 is the only cast an f32-only backend is asked for (supports(cast, bf16) and
  // (cast, f16) are false, so no 16-bit policy runs on it); a 16-bit side is refused by name.
  require_f32(Op::cast, src.dtype());
  require_f32(Op::cast, dst.dtype());
  const float* in = floats(src);
  float* out = floats(dst);
  for (std::int64_t i = 0; i < src.numel(); ++i) out[i] = in[i];
}

void NaiveBackend::scale(const Tensor& t, float factor) {
  const OpCheck check(Op::scale);
  sdk::check_scale(check, t);
  require_f32(Op::scale, t.dtype());
  float* data = floats(t);
  for (std::int64_t i = 0; i < t.numel(); ++i) data[i] *= factor;
}

void NaiveBackend::lerp(const Tensor& dst, const Tensor& src, float weight) {
  const OpCheck check(Op::lerp);
  sdk::check_lerp(check, dst, src, weight);  // f32 only, weight in [0, 1]
  float* d = floats(dst);
  const float* s = floats(src);  // may be d (in place): element i is read before it is written
  // torch.lerp's two sides, in float as the contract states: anchored at dst below 0.5 (weight 0
  // leaves dst as it was), at src from 0.5 on (weight 1 gives src exactly).
  for (std::int64_t i = 0; i < dst.numel(); ++i) {
    const float diff = s[i] - d[i];
    d[i] = weight < 0.5f ? d[i] + weight * diff : s[i] - diff * (1.0f - weight);
  }
}

void NaiveBackend::check_finite(const Tensor& flag, const Tensor& t) {
  const OpCheck check(Op::check_finite);
  sdk::check_check_finite(check, flag, t);
  require_f32(Op::check_finite, t.dtype());
  const float* data = floats(t);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(data[i])) {
      // Set, never cleared: several tensors share one flag and any of them may set it.
      *flag.data_as<std::int32_t>() = 1;
      return;
    }
  }
}

}  // namespace kiln::naive
