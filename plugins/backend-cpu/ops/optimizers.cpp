// Fused optimizer steps over flat f32 buffers, with PyTorch's semantics as ops.hpp documents:
//   SGD:  g = grad + wd p;  buf = momentum buf + (1 - dampening) g;  g = nesterov ? g + momentum
//         buf : buf;  p -= lr g.  (buf starts at zero, owned by the caller; PyTorch instead
//         seeds it with the first g, which differs only when dampening != 0.)
//   Adam: coupled decay g += wd p, decoupled (AdamW) p *= 1 - lr wd; m = b1 m + (1 - b1) g;
//         v = b2 v + (1 - b2) g^2; p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// Bias corrections are computed in double once per call; the per-element loop is f32 SIMD.
#include <cmath>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {

void CpuBackend::sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                            const SgdStep& step) {
  sdk::check_sgd_update(OpCheck(Op::sgd_update), param, momentum, grad, step);
  float* p = param.data_as<float>();
  const float* g = grad.data_as<float>();
  const std::int64_t n = param.numel();
  const float lr = step.lr, wd = step.weight_decay, mu = step.momentum;
  use_our_threads();
  if (mu == 0.0f) {
    parallel_for(n, [=](std::int64_t i) { p[i] -= lr * (g[i] + wd * p[i]); });
    return;
  }
  float* buf = momentum.data_as<float>();
  const float damp = 1.0f - step.dampening;
  if (step.nesterov == SgdStep::Nesterov::yes) {
    parallel_for(n, [=](std::int64_t i) {
      const float gi = g[i] + wd * p[i];
      const float b = mu * buf[i] + damp * gi;
      buf[i] = b;
      p[i] -= lr * (gi + mu * b);
    });
  } else {
    parallel_for(n, [=](std::int64_t i) {
      const float gi = g[i] + wd * p[i];
      const float b = mu * buf[i] + damp * gi;
      buf[i] = b;
      p[i] -= lr * b;
    });
  }
}

void CpuBackend::adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                             const Tensor& grad, const AdamStep& step) {
  sdk::check_adam_update(OpCheck(Op::adam_update), param, m, v, grad, step);
  const double t = static_cast<double>(step.step);
  const double bias1 = 1.0 - std::pow(static_cast<double>(step.beta1), t);
  const double bias2 = 1.0 - std::pow(static_cast<double>(step.beta2), t);
  const float step_size = static_cast<float>(step.lr / bias1);
  const float inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  const float b1 = step.beta1, b2 = step.beta2, eps = step.eps;
  const bool coupled = step.decay == AdamStep::Decay::coupled;
  const float coupled_wd = coupled ? step.weight_decay : 0.0f;
  const float shrink = coupled ? 1.0f : 1.0f - step.lr * step.weight_decay;
  float* p = param.data_as<float>();
  float* mp = m.data_as<float>();
  float* vp = v.data_as<float>();
  const float* g = grad.data_as<float>();
  use_our_threads();
  parallel_for(param.numel(), [=](std::int64_t i) {
    const float pi = p[i] * shrink;
    const float gi = g[i] + coupled_wd * pi;
    const float mi = b1 * mp[i] + (1.0f - b1) * gi;
    const float vi = b2 * vp[i] + (1.0f - b2) * gi * gi;
    mp[i] = mi;
    vp[i] = vi;
    p[i] = pi - step_size * mi / (std::sqrt(vi) * inv_sqrt_bias2 + eps);
  });
}

}  // namespace kiln::cpu
