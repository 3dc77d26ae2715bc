// Device-side building blocks shared by the .cu files (never included by .cpp files):
// Elem<T> loads a stored f32/f16/bf16 value as float and rounds a float back (to nearest even,
// as the cpu backend's cast), Pack<T, V> is one 16-byte vector access, and with_float_type()
// turns a run-time DType into the storage type a kernel template is instantiated with.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kiln/errors.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

template <class T>
struct Elem;

template <>
struct Elem<float> {
  static __device__ __forceinline__ float load(float v) { return v; }
  static __device__ __forceinline__ float store(float v) { return v; }
};

template <>
struct Elem<__half> {
  static __device__ __forceinline__ float load(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half store(float v) { return __float2half_rn(v); }
};

template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

/// V consecutive elements moved with one aligned access (V * sizeof(T) == 16 in the fast path).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

/// Calls body(T{}) with T = float, __half or __nv_bfloat16 for dtype; throws BackendError for any
/// other dtype (the ops layer validates first, so reaching it is a bug in the caller).
template <class Body>
void with_float_type(DType dtype, const char* op, Body&& body) {
  switch (dtype) {
    case DType::f32: body(float{}); return;
    case DType::f16: body(__half{}); return;
    case DType::bf16: body(__nv_bfloat16{}); return;
    default:
      throw BackendError(std::string("cuda backend, ") + op + ": kernel launched for dtype " +
                         std::string(dtype_name(dtype)) +
                         ", which it has no instantiation for; validate the arguments first");
  }
}

/// Index of this thread in a 1-D grid and the grid-stride step, as 64-bit values.
__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace kiln::cuda::kernels
