// The fill kernel (a grid-stride loop over one element type) and the f16/bf16 bit conversions;
// see fill_kernel.hpp. One launch configuration for every size: 256 threads, at most 4096 blocks,
// enough to saturate memory bandwidth on every architecture from sm_75 on. No fmt here: fmt 9's
// consteval format strings do not compile under nvcc in C++20 mode.
#include "memory/fill_kernel.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_check.hpp"

namespace kiln::cuda {
namespace {

template <class T>
__global__ void fill_kernel(T* dst, std::size_t count, T value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    dst[i] = value;
  }
}

template <class T>
void launch(void* dst, std::size_t count, std::uint64_t pattern, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const std::size_t wanted = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>(wanted, 4096));
  T value;
  std::memcpy(&value, &pattern, sizeof(T));  // little-endian: the low bytes
  fill_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst), count, value);
  check_last_launch("fill (" + std::to_string(count) + " elements of " + std::to_string(sizeof(T)) + " bytes)");
}

}  // namespace

void fill_pattern(void* dst, std::size_t count, unsigned element_bytes, std::uint64_t pattern,
                  cudaStream_t stream) {
  if (count == 0) return;
  if (pattern == 0 || element_bytes == 1) {
    check_cuda(cudaMemsetAsync(dst, static_cast<int>(pattern & 0xff), count * element_bytes, stream),
               "fill: cudaMemsetAsync of " + std::to_string(count * element_bytes) + " bytes");
    return;
  }
  switch (element_bytes) {
    case 2: launch<std::uint16_t>(dst, count, pattern, stream); break;
    case 4: launch<std::uint32_t>(dst, count, pattern, stream); break;
    case 8: launch<std::uint64_t>(dst, count, pattern, stream); break;
    default:
      check_cuda(cudaErrorInvalidValue, "fill: element size " + std::to_string(element_bytes) + " is not 1, 2, 4 or 8");
  }
}

std::uint16_t half_bits(float value) {
  const __half h = __float2half_rn(value);
  std::uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

std::uint16_t bfloat16_bits(float value) {
  const __nv_bfloat16 b = __float2bfloat16_rn(value);
  std::uint16_t bits;
  std::memcpy(&bits, &b, sizeof(bits));
  return bits;
}

}  // namespace kiln::cuda
