// cast: dst = src converted to dst's dtype, between f32 and bf16/f16 (either direction), and
// same-dtype copies. Rounding is to nearest, ties to even (ops/half.hpp), matching PyTorch's
// .to(torch.bfloat16) / .half(). supports(cast, d) answers for d in {f32, bf16, f16}. Both run
// in the vector loops of f16_convert.hpp / bf16_convert.hpp (bit-identical to kiln/sdk/half.hpp).
#include <cstring>

#include "cpu_backend.hpp"
#include "ops/bf16_convert.hpp"
#include "ops/f16_convert.hpp"
#include "validate.hpp"

namespace kiln::cpu {

void CpuBackend::cast(const Tensor& dst, const Tensor& src) {
  sdk::check_cast(OpCheck(Op::cast), dst, src);
  const std::int64_t n = src.numel();
  if (dst.dtype() == src.dtype()) {
    if (dst.data() != src.data()) std::memmove(dst.data(), src.data(), src.bytes());
    return;
  }
  use_our_threads();
  if (src.dtype() == DType::f32) {
    const float* in = src.data_as<float>();
    auto* out = static_cast<std::uint16_t*>(dst.data());
    if (dst.dtype() == DType::bf16) {
      f32_to_bf16_parallel(in, out, static_cast<std::size_t>(n));
    } else {
      f32_to_f16_parallel(in, out, static_cast<std::size_t>(n));
    }
  } else {
    const auto* in = static_cast<const std::uint16_t*>(src.data());
    float* out = dst.data_as<float>();
    if (src.dtype() == DType::bf16) {
      bf16_to_f32_parallel(in, out, static_cast<std::size_t>(n));
    } else {
      f16_to_f32_parallel(in, out, static_cast<std::size_t>(n));
    }
  }
}

}  // namespace kiln::cpu
