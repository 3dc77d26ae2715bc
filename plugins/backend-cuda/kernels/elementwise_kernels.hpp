// Launchers of the small element-wise kernels (elementwise_kernels.cu): add, scale, lerp, cast
// and check_finite. Plain C++ signatures over raw device pointers; same conventions as
// activation_kernels.hpp (enqueue on `stream`, throw BackendError on a failed launch, n == 0 is
// a no-op).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// c[i] = a[i] + b[i]; c may alias a or b.
void add(void* c, const void* a, const void* b, std::int64_t n, DType dtype, cudaStream_t stream);

/// t[i] *= factor, in place.
void scale(void* t, float factor, std::int64_t n, DType dtype, cudaStream_t stream);

/// dst[i] += weight * (src[i] - dst[i]) in f32, weight in [0, 1], as torch.lerp computes it
/// (kiln/backend.hpp): from dst below weight 0.5, from src otherwise, so weight 0 leaves dst and
/// weight 1 gives src exactly (nvcc fuses each side's multiply-add, which the contract allows).
/// src may alias dst.
void lerp(float* dst, const float* src, float weight, std::int64_t n, cudaStream_t stream);

/// dst[i] = src[i] converted (cast_path(src_dtype, dst_dtype) != unsupported); a same-dtype cast
/// is a device-to-device copy (nothing when dst == src).
void cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n,
          cudaStream_t stream);

/// *flag = 1 if any of the n elements of t is inf or NaN; *flag is not written otherwise.
void check_finite(std::int32_t* flag, const void* t, std::int64_t n, DType dtype,
                  cudaStream_t stream);

}  // namespace kiln::cuda::kernels
