// Per-call constants of the fused optimizer kernels, computed on the host in plain C++ (tested
// without a GPU) exactly as the cpu backend does: Adam's bias corrections in double, once per
// call, so the per-element kernel is pure f32 and cpu and cuda differ only by FMA contraction.
#pragma once

#include <cmath>

#include "kiln/ops.hpp"

namespace kiln::cuda::kernels {

struct AdamCoefficients {
  float step_size = 0;       ///< lr / (1 - beta1^t)
  float inv_sqrt_bias2 = 0;  ///< 1 / sqrt(1 - beta2^t)
  float beta1 = 0, beta2 = 0, eps = 0;
  float coupled_decay = 0;   ///< g += coupled_decay * p (Adam); 0 for AdamW
  float shrink = 1;          ///< p *= shrink before the update (AdamW: 1 - lr * wd); 1 for Adam
};

/// The caller has checked step.step >= 1.
inline AdamCoefficients adam_coefficients(const AdamStep& step) {
  const double t = static_cast<double>(step.step);
  const double bias1 = 1.0 - std::pow(static_cast<double>(step.beta1), t);
  const double bias2 = 1.0 - std::pow(static_cast<double>(step.beta2), t);
  const bool coupled = step.decay == AdamStep::Decay::coupled;
  AdamCoefficients c;
  c.step_size = static_cast<float>(step.lr / bias1);
  c.inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  c.beta1 = step.beta1;
  c.beta2 = step.beta2;
  c.eps = step.eps;
  c.coupled_decay = coupled ? step.weight_decay : 0.0f;
  c.shrink = coupled ? 1.0f : 1.0f - step.lr * step.weight_decay;
  return c;
}

}  // namespace kiln::cuda::kernels
