// dropout forward/backward, f32 data with a u8 mask.
// mask[i] = unit_float(derive_seed(seed, i)) >= p (kiln/rng.hpp): a pure function of (seed, i),
// so the mask is the same for any thread count and on the cuda backend. Kept elements are scaled
// by 1 / (1 - p) (inverted dropout, as PyTorch). p == 0 is an exact copy with an all-ones mask;
// p must be in [0, 1) because p == 1 would divide by zero.
#include <cstring>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "kiln/rng.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

void check_probability(const OpCheck& check, float p) {
  if (!(p >= 0.0f && p < 1.0f)) {
    check.fail(fmt::format("p = {} is outside [0, 1); set the model's dropout to a probability "
                           "below 1",
                           p));
  }
}

}  // namespace

void CpuBackend::dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                                 std::uint64_t seed) {
  const OpCheck check(Op::dropout_forward);
  check.usable("y", y).usable("mask", mask).usable("x", x);
  check.dtype("y", y, DType::f32).dtype("x", x, DType::f32).dtype("mask", mask, DType::u8);
  check.same_shape("y", y, "x", x).same_numel("mask", mask, "x", x);
  check_probability(check, p);
  float* out = y.data_as<float>();
  const float* in = x.data_as<float>();
  std::uint8_t* keep = mask.data_as<std::uint8_t>();
  const std::int64_t n = x.numel();
  if (p == 0.0f) {
    if (out != in) std::memmove(out, in, x.bytes());
    std::memset(keep, 1, static_cast<std::size_t>(n));
    return;
  }
  const float inv_keep = 1.0f / (1.0f - p);
  use_our_threads();
  parallel_for(n, [&](std::int64_t i) {
    const bool kept = unit_float(derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
    keep[i] = kept ? 1 : 0;
    out[i] = kept ? in[i] * inv_keep : 0.0f;
  });
}

void CpuBackend::dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  const OpCheck check(Op::dropout_backward);
  check.usable("dx", dx).usable("dy", dy).usable("mask", mask);
  check.dtype("dx", dx, DType::f32).dtype("dy", dy, DType::f32).dtype("mask", mask, DType::u8);
  check.same_shape("dx", dx, "dy", dy).same_numel("mask", mask, "dy", dy);
  check_probability(check, p);
  float* out = dx.data_as<float>();
  const float* in = dy.data_as<float>();
  const std::uint8_t* keep = mask.data_as<std::uint8_t>();
  const float inv_keep = 1.0f / (1.0f - p);
  use_our_threads();
  parallel_for(dy.numel(), [&](std::int64_t i) { out[i] = keep[i] != 0 ? in[i] * inv_keep : 0.0f; });
}

}  // namespace kiln::cpu
