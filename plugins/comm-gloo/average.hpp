// In-place division for average (sum, then divide by the world size, in the element type's own
// precision except f16, which divides in f32 and rounds once). bf16 all-reduces go through an f32
// scratch buffer (Gloo has no bfloat16), converted with the SDK's kiln/sdk/half.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::gloo_comm {

void divide(float* data, std::size_t n, int divisor) noexcept;
void divide(double* data, std::size_t n, int divisor) noexcept;
/// IEEE half bits, divided through f32.
void divide_f16(std::uint16_t* data, std::size_t n, int divisor) noexcept;

}  // namespace kiln::gloo_comm
