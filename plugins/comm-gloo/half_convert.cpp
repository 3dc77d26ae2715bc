// bf16/f16 conversions and average division (see half_convert.hpp).
#include "half_convert.hpp"

#include <gloo/types.h>

#include <cstring>

namespace kiln::gloo_comm {

void bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(in[i]) << 16;
    std::memcpy(&out[i], &bits, sizeof(float));
  }
}

void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &in[i], sizeof(float));
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
      out[i] = static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // keep NaN quiet and NaN
      continue;
    }
    const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    out[i] = static_cast<std::uint16_t>((bits + rounding) >> 16);
  }
}

void divide(float* data, std::size_t n, int divisor) noexcept {
  const float d = static_cast<float>(divisor);
  for (std::size_t i = 0; i < n; ++i) data[i] /= d;
}

void divide(double* data, std::size_t n, int divisor) noexcept {
  const double d = static_cast<double>(divisor);
  for (std::size_t i = 0; i < n; ++i) data[i] /= d;
}

void divide_f16(std::uint16_t* data, std::size_t n, int divisor) noexcept {
  const float d = static_cast<float>(divisor);
  for (std::size_t i = 0; i < n; ++i) {
    ::gloo::float16 h;
    std::memcpy(static_cast<void*>(&h), &data[i], sizeof(h));
    h = ::gloo::cpu_float2half_rn(::gloo::cpu_half2float(h) / d);
    std::memcpy(&data[i], &h, sizeof(h));
  }
}

}  // namespace kiln::gloo_comm
