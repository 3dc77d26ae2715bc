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

inline std::uint16_t f32_to_f16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  std::uint32_t h;
  if (u >= 0x7f800000u) {
    h = u > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN (quiet) or inf
  } else if (u >= 0x477ff000u) {
    h = 0x7c00u;  // >= 65520 = halfway between 65504 (max, odd mantissa) and 2^16: inf
  } else if (u < 0x38800000u) {
    // Below 2^-14 the f16 result is subnormal with a fixed quantum of 2^-24. Adding 0.5f (whose
    // ulp is exactly 2^-24) makes the FPU round to that quantum, ties to even; the low mantissa
    // bits of the sum are then the f16 subnormal.
    const float sum = std::bit_cast<float>(u) + 0.5f;
    h = std::bit_cast<std::uint32_t>(sum) - 0x3f000000u;
  } else {
    const std::uint32_t odd = (u >> 13) & 1u;
    u += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + odd;  // rebias, round
    h = u >> 13;
  }
  return static_cast<std::uint16_t>(sign | h);
}

inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in f32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
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
