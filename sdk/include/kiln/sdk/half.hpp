// The one f32 <-> bf16 / f16 conversion of Kiln's host code: scalar, round-to-nearest-even,
// written with integer bit operations so it needs no F16C/AVX-512-BF16 build flags and
// vectorises in plain loops (the cpu backend's element-wise kernels inline it). Plugins that
// stage 16-bit data on the host (a communicator without bf16, a data source writing f16) use
// this rather than a copy of their own, so every path rounds alike.
// NaN stays NaN (quiet), infinities stay infinite, f32 values beyond f16's range become +-inf,
// and f16 subnormals are produced and read exactly.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace kiln::sdk {

inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  // Add half an ulp of bf16, plus one when the kept part is odd (ties to even), then truncate.
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

inline float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

namespace half_detail {
/// a where `take_a`, else b, as bit masks: both sides are computed and no branch is left, so GCC
/// vectorises loops over the f16 conversions below (with `?:` or `if` it keeps the control flow,
/// and f16 element-wise loops ran scalar at a third of the bf16 ones' speed).
inline std::uint32_t select(bool take_a, std::uint32_t a, std::uint32_t b) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(take_a);
  return (a & mask) | (b & ~mask);
}
}  // namespace half_detail

inline std::uint16_t f32_to_f16(float f) {
  using half_detail::select;
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  // Every case is computed and one kept (see select). At or above 0x477ff000 (65520, halfway
  // between 65504, the largest f16 with an odd mantissa, and 2^16) the result is inf, or the
  // quiet NaN for a NaN.
  const std::uint32_t too_big = select(u > 0x7f800000u, 0x7e00u, 0x7c00u);
  // Below 2^-14 the f16 result is subnormal with a fixed quantum of 2^-24. Adding 0.5f (whose ulp
  // is exactly 2^-24) makes the FPU round to that quantum, ties to even; the low mantissa bits of
  // the sum are then the f16 subnormal.
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(u) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent and round the mantissa to 10 bits, ties to even.
  const std::uint32_t odd = (u >> 13) & 1u;
  const std::uint32_t normal = (u + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + odd) >> 13;
  const std::uint32_t h = select(u >= 0x477ff000u, too_big, select(u < 0x38800000u, subnormal, normal));
  return static_cast<std::uint16_t>(sign | h);
}

inline float f16_to_f32(std::uint16_t h) {
  using half_detail::select;
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  // Zero or subnormal (exponent 0): mantissa * 2^-24, exact in f32. Every case is computed and
  // one kept (see select).
  const float small = static_cast<float>(static_cast<std::int32_t>(mantissa)) * 5.9604644775390625e-08f;
  const std::uint32_t inf_or_nan = 0x7f800000u | (mantissa << 13);
  const std::uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
  const std::uint32_t magnitude =
      select(exponent == 0, std::bit_cast<std::uint32_t>(small), select(exponent == 31, inf_or_nan, normal));
  return std::bit_cast<float>(sign | magnitude);
}

/// Whole-buffer forms, for staging.
inline void bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}
inline void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}
inline void f16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}
inline void f32_to_f16(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

}  // namespace kiln::sdk
