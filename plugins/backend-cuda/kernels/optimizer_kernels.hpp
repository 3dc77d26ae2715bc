// Launchers of the fused optimizer updates (optimizer_kernels.cu) over flat f32 buffers, one pass
// over param/grad/state per step with PyTorch's semantics as kiln/ops.hpp documents them (SgdStep,
// AdamStep). Conventions as activation_kernels.hpp.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kiln/ops.hpp"
#include "kernels/optimizer_math.hpp"

namespace kiln::cuda::kernels {

/// One SGD step; `momentum_buf` is neither read nor written (and may be null) when
/// step.momentum == 0.
void sgd_update(float* param, float* momentum_buf, const float* grad, std::int64_t n,
                const SgdStep& step, cudaStream_t stream);

/// One Adam/AdamW step with host-computed constants (adam_coefficients()).
void adam_update(float* param, float* m, float* v, const float* grad, std::int64_t n,
                 const AdamCoefficients& coefficients, cudaStream_t stream);

}  // namespace kiln::cuda::kernels
