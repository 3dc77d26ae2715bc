// Which storage types the kernels accept, as plain C++ (unit-tested without a GPU). The .cu
// launchers switch on these answers to pick a template instantiation (float, __half,
// __nv_bfloat16; math always in f32), so an unsupported dtype never reaches a kernel: the ops
// layer validates first, and a launcher given one anyway throws instead of guessing.
#pragma once

#include <cstdint>

#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// f32, f16 and bf16: the storage types of the element-wise kernels.
constexpr bool is_float_dtype(DType d) noexcept {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16;
}

/// The conversion cast() performs (the cpu backend's rule: f32 <-> bf16/f16 and same-dtype copies).
enum class CastPath : std::uint8_t { copy, f32_to_f16, f32_to_bf16, f16_to_f32, bf16_to_f32, unsupported };

constexpr CastPath cast_path(DType src, DType dst) noexcept {
  if (!is_float_dtype(src) || !is_float_dtype(dst)) return CastPath::unsupported;
  if (src == dst) return CastPath::copy;
  if (src == DType::f32) return dst == DType::f16 ? CastPath::f32_to_f16 : CastPath::f32_to_bf16;
  if (dst == DType::f32) return src == DType::f16 ? CastPath::f16_to_f32 : CastPath::bf16_to_f32;
  return CastPath::unsupported;  // f16 <-> bf16 goes through f32 in two calls
}

/// Bit pattern of the exponent field (all ones = inf or NaN) for check_finite; 0 if not a float.
constexpr std::uint32_t exponent_mask(DType d) noexcept {
  switch (d) {
    case DType::f32: return 0x7f800000u;
    case DType::bf16: return 0x7f80u;
    case DType::f16: return 0x7c00u;
    default: return 0u;
  }
}

}  // namespace kiln::cuda::kernels
