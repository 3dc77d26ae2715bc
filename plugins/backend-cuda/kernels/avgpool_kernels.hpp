// Launchers of global average pooling (avgpool_kernels.cu). The image tensor may be NCHW
// (Layout::row_major) or channels-last (Layout::nhwc); the pooled tensor is (N, C) row-major.
// Sums in f32 whatever the storage type. Conventions as activation_kernels.hpp.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/kernel_args.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// y (N, C) = mean over H, W of x. hw > 0.
void global_avgpool_forward(void* y, const void* x, const ImageGeometry& g, DType dtype,
                            cudaStream_t stream);

/// dx (N, C, H, W) = dy (N, C) / hw broadcast over H, W.
void global_avgpool_backward(void* dx, const void* dy, const ImageGeometry& g, DType dtype,
                             cudaStream_t stream);

}  // namespace kiln::cuda::kernels
