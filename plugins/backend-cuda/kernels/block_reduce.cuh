// Block-wide reductions for the row kernels (softmax cross-entropy, loss totals): warp shuffles,
// then one value per warp through shared memory. The combination order depends only on the
// block size, never on timing, so results are deterministic run to run. Every thread of the
// block must call them (they contain __syncthreads) and receives the result.
#pragma once

namespace kiln::cuda::kernels {

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024).
template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : T(0);
  return warp_sum(v);
}

/// (value, index) of the maximum over the block, ties to the smallest index (the first maximum,
/// as the cpu backend's argmax). NaN never wins a comparison, like the cpu loop's `x > max`,
/// except that the cpu keeps a NaN in column 0; rows with NaN logits have a NaN loss anyway.
struct MaxAt {
  float value;
  int index;
};

__device__ __forceinline__ MaxAt max_at_combine(MaxAt a, MaxAt b) {
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

__device__ __forceinline__ MaxAt warp_max_at(MaxAt v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxAt other;
    other.value = __shfl_xor_sync(0xffffffffu, v.value, offset);
    other.index = __shfl_xor_sync(0xffffffffu, v.index, offset);
    v = max_at_combine(v, other);
  }
  return v;
}

__device__ inline MaxAt block_max_at(MaxAt v) {
  __shared__ float values[32];
  __shared__ int indices[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max_at(v);
  __syncthreads();
  if (lane == 0) {
    values[warp] = v.value;
    indices[warp] = v.index;
  }
  __syncthreads();
  if (lane < warps) {
    v.value = values[lane];
    v.index = indices[lane];
  } else {
    v.value = -__int_as_float(0x7f800000);  // -inf
    v.index = 0x7fffffff;
  }
  return warp_max_at(v);
}

}  // namespace kiln::cuda::kernels
