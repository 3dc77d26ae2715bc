// The dropout keep/drop decision in a form the compiler vectorises, bit-identical to the
// definition every backend shares (kiln/rng.hpp, repeated by the cuda backend's mask_rng.hpp):
//
//   keep(i) = unit_float(derive_seed(seed, i)) >= p
//
// Two rewrites, both exact:
//
// 1. An integer threshold instead of a float compare. unit_float(h) is u * 2^-24 with
//    u = h >> 40 < 2^24; u is exact in a float and so is the product (a power-of-two scale).
//    p * 2^24 is exact too (p is a float in [0, 1), scaling by 2^24 neither overflows nor
//    rounds). So u * 2^-24 >= p  <=>  u >= p * 2^24  <=>  u >= ceil(p * 2^24), because u is an
//    integer. dropout_threshold() computes that ceiling once per call; the loop then compares
//    24-bit integers and never converts to float.
// 2. derive_seed(seed, i) with b = c = 0 is mix64(mix64(mix64(seed ^ mix64(i)) ^ kB) ^ kC),
//    kB and kC the mixes of derive_seed's two constant counters; they are folded here at
//    compile time. Only the top 24 bits of the last mix are used, and its final
//    x ^ (x >> 31) leaves those bits unchanged (x >> 31 has zeros in bits 33..63), so it is
//    skipped.
//
// What remains is 64-bit adds, shifts, xors and multiplies per element, with no branch and no
// cross-lane dependency: GCC turns fill_dropout_mask's loop into AVX-512 (vpmullq, 8 lanes) or
// AVX2 code. tests/ops/test_dropout_mask.cpp checks both rewrites against rng.hpp, including p at
// every kind of 24-bit boundary.
#pragma once

#include <cmath>
#include <cstdint>

#include "kiln/rng.hpp"

namespace kiln::cpu {

/// ceil(p * 2^24) for p in [0, 1): element i is kept iff (derive_seed(seed, i) >> 40) >= it.
inline std::uint32_t dropout_threshold(float p) noexcept {
  return static_cast<std::uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0));
}

namespace dropout_detail {
inline constexpr std::uint64_t kB = mix64(0x632BE59BD9B4E019ull);  // mix64(b + ...), b = 0
inline constexpr std::uint64_t kC = mix64(0x8CB92BA72F3D8DD7ull);  // mix64(c + ...), c = 0

/// mix64 up to its last multiply: the top 24 bits equal mix64(x)'s (see above).
inline std::uint64_t mix64_top(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  return (x ^ (x >> 27)) * 0x94D049BB133111EBull;
}
}  // namespace dropout_detail

/// derive_seed(seed, i) >> 40: the 24-bit uniform value of element i.
inline std::uint64_t dropout_bits24(std::uint64_t seed, std::uint64_t i) noexcept {
  using namespace dropout_detail;
  return mix64_top(mix64(mix64(seed ^ mix64(i)) ^ kB) ^ kC) >> 40;
}

/// keep[j] = 1 if element first + j is kept, else 0, for j < count.
inline void fill_dropout_mask(std::uint8_t* keep, std::int64_t first, std::int64_t count,
                              std::uint64_t seed, std::uint32_t threshold) noexcept {
  const std::uint64_t base = static_cast<std::uint64_t>(first);
  for (std::int64_t j = 0; j < count; ++j) {
    keep[j] = dropout_bits24(seed, base + static_cast<std::uint64_t>(j)) >= threshold ? 1 : 0;
  }
}

}  // namespace kiln::cpu
