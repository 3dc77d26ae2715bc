// Device fill for Backend::fill: replicate one element's bit pattern (1, 2, 4 or 8 bytes) over a
// buffer on a stream, plus the host-side f16/bf16 conversions that produce the pattern (CUDA's
// own round-to-nearest-even, so fill agrees with the cast kernels).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace kiln::cuda {

/// Writes `count` elements of `element_bytes` (1, 2, 4 or 8) holding the low bytes of `pattern`
/// at `dst` on `stream`. Zero patterns and bytes use cudaMemsetAsync. Checks the launch.
void fill_pattern(void* dst, std::size_t count, unsigned element_bytes, std::uint64_t pattern,
                  cudaStream_t stream);
/// IEEE half bits of `value` (round to nearest even).
std::uint16_t half_bits(float value);
/// bfloat16 bits of `value` (round to nearest even).
std::uint16_t bfloat16_bits(float value);

}  // namespace kiln::cuda
