// Small element-wise ops: add, scale (f32, bf16, f16; see elem.hpp), lerp (f32) and check_finite.
// lerp is torch.lerp's two-sided formula (kiln/backend.hpp), chosen once per call by the weight so
// each side is a plain SIMD loop; it keeps [ema]'s moving average, so weight 0 and 1 are exact.
// check_finite tests the exponent bits instead of calling std::isfinite so the loop is a plain
// integer OR-reduction that vectorises (and survives -ffast-math); it works on f32, bf16 and f16.
#include <cstdint>

#include "cpu_backend.hpp"
#include "ops/elem.hpp"
#include "ops/f16_rows.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

/// 1 if any element's exponent field is all ones (inf or NaN), else 0.
template <class Bits>
int any_non_finite(const Bits* p, std::int64_t n, Bits exponent_mask) {
  Bits any = 0;
  if (n > kParallelMinElements) {
#pragma omp parallel for simd reduction(| : any) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) any |= static_cast<Bits>((p[i] & exponent_mask) == exponent_mask);
  } else {
#pragma omp simd reduction(| : any)
    for (std::int64_t i = 0; i < n; ++i) any |= static_cast<Bits>((p[i] & exponent_mask) == exponent_mask);
  }
  return any != 0 ? 1 : 0;
}

}  // namespace

void CpuBackend::add(const Tensor& c, const Tensor& a, const Tensor& b) {
  sdk::check_add(OpCheck(Op::add), c, a, b);
  use_our_threads();
  with_float_dtype(c.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(c.data());
    const T* x = static_cast<const T*>(a.data());
    const T* y = static_cast<const T*>(b.data());
    map_elements<E>(c.numel(), out, [](float u, float v) { return u + v; }, x, y);
  });
}

void CpuBackend::scale(const Tensor& t, float factor) {
  sdk::check_scale(OpCheck(Op::scale), t);
  use_our_threads();
  with_float_dtype(t.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* p = static_cast<T*>(t.data());
    parallel_for(t.numel(), [=](std::int64_t i) { p[i] = E::store(E::load(p[i]) * factor); });
  });
}

void CpuBackend::lerp(const Tensor& dst, const Tensor& src, float weight) {
  sdk::check_lerp(OpCheck(Op::lerp), dst, src, weight);
  use_our_threads();
  float* d = dst.data_as<float>();
  const float* s = src.data_as<float>();  // may be d: each element is read before it is written
  if (weight < 0.5f) {
    // Anchored at dst: weight 0 adds 0 * (s - d) and leaves d as it was.
    parallel_for(dst.numel(), [=](std::int64_t i) { d[i] = d[i] + weight * (s[i] - d[i]); });
  } else {
    // Anchored at src: weight 1 subtracts (s - d) * 0 and gives s. 1 - weight is exact for
    // weight in [0.5, 1] (Sterbenz), so this side rounds no more often than the other.
    const float rest = 1.0f - weight;
    parallel_for(dst.numel(), [=](std::int64_t i) { d[i] = s[i] - (s[i] - d[i]) * rest; });
  }
}

void CpuBackend::check_finite(const Tensor& flag, const Tensor& t) {
  sdk::check_check_finite(OpCheck(Op::check_finite), flag, t);
  int found = 0;
  use_our_threads();
  switch (t.dtype()) {
    case DType::f32:
      found = any_non_finite(static_cast<const std::uint32_t*>(t.data()), t.numel(), 0x7f800000u);
      break;
    case DType::bf16:
      found = any_non_finite(static_cast<const std::uint16_t*>(t.data()), t.numel(),
                             std::uint16_t{0x7f80});
      break;
    case DType::f16:
      found = any_non_finite(static_cast<const std::uint16_t*>(t.data()), t.numel(),
                             std::uint16_t{0x7c00});
      break;
    default:
      break;  // refused by check_check_finite
  }
  if (found != 0) *flag.data_as<std::int32_t>() = 1;
}

}  // namespace kiln::cpu
