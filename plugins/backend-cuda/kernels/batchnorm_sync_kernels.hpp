// Launchers of the synchronised batch-norm ops (batchnorm_sync_kernels.cu; backend.hpp's
// batchnorm_stats, batchnorm_backward_reduce, batchnorm_backward_elemt for [model] sync_bn).
// Data (x, dy, dx) is f32, f16 or bf16 in the walk's layout; every per-channel operand is f32 (C).
// Semantics are the cpu backend's (plugins/backend-cpu/ops/batchnorm_sync_loops.cpp): sums in
// f64, the variance in two passes. `workspace` is device scratch of the size
// batchnorm_sync_geometry.hpp gives for the op, owned by the caller until the stream passes.
// Conventions as activation_kernels.hpp (outputs first; enqueue only; check_last_launch).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/batchnorm_sync_geometry.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// mean = the channel's mean, var = its biased variance (sum((x - mean)^2) / count).
void batchnorm_stats(float* mean, float* var, const void* x, const ChannelWalk& w, DType dtype, void* workspace,
                     cudaStream_t stream);

/// sum_dy = sum(dy), sum_dy_xhat = sum(dy * (x - mean)) * invstd, per channel (overwritten).
void batchnorm_backward_reduce(float* sum_dy, float* sum_dy_xhat, const void* dy, const void* x, const float* mean,
                               const float* invstd, const ChannelWalk& w, DType dtype, void* workspace,
                               cudaStream_t stream);

/// dx = gamma invstd (dy - sum_dy / count - (x - mean) invstd sum_dy_xhat / count).
void batchnorm_backward_elemt(void* dx, const void* dy, const void* x, const float* gamma, const float* mean,
                              const float* invstd, const float* sum_dy, const float* sum_dy_xhat,
                              std::int64_t count, const ChannelWalk& w, DType dtype, void* workspace,
                              cudaStream_t stream);

}  // namespace kiln::cuda::kernels
