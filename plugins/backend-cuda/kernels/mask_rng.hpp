// The dropout mask formula of kiln/rng.hpp, callable from device code: mask[i] =
// unit_float(derive_seed(seed, i)) >= p. rng.hpp's functions are constexpr host functions, which
// device code may call only with nvcc's --expt-relaxed-constexpr; rather than depend on a build
// flag this header repeats them as __host__ __device__ functions, and the CI test
// (tests/cuda-kernels) checks them against rng.hpp bit for bit, so cpu and cuda masks agree.
// Compiles as plain C++ too (KILN_HOST_DEVICE is empty outside nvcc).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KILN_HOST_DEVICE inline
#endif

namespace kiln::cuda::kernels {

KILN_HOST_DEVICE std::uint64_t mask_mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// kiln::derive_seed(seed, a) (b = c = 0).
KILN_HOST_DEVICE std::uint64_t mask_derive_seed(std::uint64_t seed, std::uint64_t a) {
  return mask_mix64(mask_mix64(mask_mix64(seed ^ mask_mix64(a)) ^ mask_mix64(0x632BE59BD9B4E019ull)) ^
                    mask_mix64(0x8CB92BA72F3D8DD7ull));
}

/// kiln::unit_float: the top 24 bits as a float in [0, 1).
KILN_HOST_DEVICE float mask_unit_float(std::uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

/// Whether dropout keeps element i.
KILN_HOST_DEVICE bool dropout_keeps(std::uint64_t seed, std::uint64_t i, float p) {
  return mask_unit_float(mask_derive_seed(seed, i)) >= p;
}

}  // namespace kiln::cuda::kernels
