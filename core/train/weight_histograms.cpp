// Weight histograms for TensorBoard (see the header).
#include "kiln/train/weight_histograms.hpp"

#include <cstdint>
#include <cstring>

#include "kiln/sdk/half.hpp"

namespace kiln::train {

std::vector<std::pair<std::string, io::Histogram>> weight_histograms(Backend& backend,
                                                                     std::span<const Parameter> params) {
  std::vector<std::pair<std::string, io::Histogram>> out;
  std::vector<float> values;
  for (const Parameter& p : params) {
    Tensor host = host_tensor(p.value.shape(), p.value.dtype());
    backend.copy(p.value, host);
    const auto n = static_cast<std::size_t>(host.numel());
    values.resize(n);
    const auto* bytes = static_cast<const unsigned char*>(host.data());
    switch (host.dtype()) {
      case DType::f32: std::memcpy(values.data(), bytes, 4 * n); break;
      case DType::bf16:
      case DType::f16:
        for (std::size_t i = 0; i < n; ++i) {
          std::uint16_t h = 0;
          std::memcpy(&h, bytes + 2 * i, 2);
          values[i] = host.dtype() == DType::bf16 ? sdk::bf16_to_f32(h) : sdk::f16_to_f32(h);
        }
        break;
      default: continue;  // not a floating parameter: nothing a weight histogram would show
    }
    out.emplace_back("weights/" + p.name, io::histogram_of(values));
  }
  return out;
}

}  // namespace kiln::train
