// Launchers of the dropout kernels (dropout_kernels.cu). The mask is a pure function of
// (seed, element index) -- mask_rng.hpp, identical to the cpu backend's -- so the same seed gives
// the same mask on either backend. Conventions as activation_kernels.hpp.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// mask[i] = dropout_keeps(seed, i, p); y[i] = mask[i] ? x[i] / (1 - p) : 0. 0 <= p < 1; p == 0
/// copies x and sets every mask byte to 1. y may alias x.
void dropout_forward(void* y, std::uint8_t* mask, const void* x, std::int64_t n, DType dtype,
                     float p, std::uint64_t seed, cudaStream_t stream);

/// dx[i] = mask[i] ? dy[i] / (1 - p) : 0.
void dropout_backward(void* dx, const void* dy, const std::uint8_t* mask, std::int64_t n,
                      DType dtype, float p, cudaStream_t stream);

}  // namespace kiln::cuda::kernels
