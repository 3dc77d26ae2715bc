// Average division (see average.hpp).
#include "average.hpp"

#include <kiln/sdk/half.hpp>

namespace kiln::gloo_comm {

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
    data[i] = sdk::f32_to_f16(sdk::f16_to_f32(data[i]) / d);
  }
}

}  // namespace kiln::gloo_comm
