// Element conversions the gloo communicator needs around Gloo's own types: bf16 <-> f32 for the
// f32 scratch buffer bf16 all-reduces go through (Gloo has no bfloat16), and in-place division
// for average (sum, then divide by the world size, in the element type's own precision except
// f16/bf16, which divide in f32 and round once).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::gloo_comm {

/// bf16 bits -> f32 (exact).
void bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept;
/// f32 -> bf16 bits, round to nearest even; NaN stays NaN.
void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) noexcept;

void divide(float* data, std::size_t n, int divisor) noexcept;
void divide(double* data, std::size_t n, int divisor) noexcept;
/// IEEE half bits, divided through f32.
void divide_f16(std::uint16_t* data, std::size_t n, int divisor) noexcept;

}  // namespace kiln::gloo_comm
