// dropout forward/backward, f32/bf16/f16 data (elem.hpp) with a u8 mask.
// mask[i] = unit_float(derive_seed(seed, i)) >= p (kiln/rng.hpp): a pure function of (seed, i),
// so the mask is the same for any thread count and on the cuda backend. Kept elements are scaled
// by 1 / (1 - p) (inverted dropout, as PyTorch). p == 0 is an exact copy with an all-ones mask;
// p must be in [0, 1) because p == 1 would divide by zero.
#include <cstring>

#include "cpu_backend.hpp"
#include "ops/elem.hpp"
#include "kiln/rng.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
void CpuBackend::dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                                 std::uint64_t seed) {
  sdk::check_dropout_forward(OpCheck(Op::dropout_forward), y, mask, x, p);
  std::uint8_t* keep = mask.data_as<std::uint8_t>();
  const std::int64_t n = x.numel();
  if (p == 0.0f) {
    if (y.data() != x.data()) std::memmove(y.data(), x.data(), x.bytes());
    std::memset(keep, 1, static_cast<std::size_t>(n));
    return;
  }
  const float inv_keep = 1.0f / (1.0f - p);
  use_our_threads();
  with_float_dtype(x.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(y.data());
    const T* in = static_cast<const T*>(x.data());
    parallel_for(n, [&](std::int64_t i) {
      const bool kept = unit_float(derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
      keep[i] = kept ? 1 : 0;
      out[i] = kept ? E::store(E::load(in[i]) * inv_keep) : E::store(0.0f);
    });
  });
}

void CpuBackend::dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  sdk::check_dropout_backward(OpCheck(Op::dropout_backward), dx, dy, mask, p);
  const std::uint8_t* keep = mask.data_as<std::uint8_t>();
  const float inv_keep = 1.0f / (1.0f - p);
  use_our_threads();
  with_float_dtype(dy.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(dx.data());
    const T* in = static_cast<const T*>(dy.data());
    parallel_for(dy.numel(), [&](std::int64_t i) {
      out[i] = keep[i] != 0 ? E::store(E::load(in[i]) * inv_keep) : E::store(0.0f);
    });
  });
}

}  // namespace kiln::cpu
