// Small element-wise ops: add, scale (f32, bf16, f16; see elem.hpp) and check_finite.
// check_finite tests the exponent bits instead of calling std::isfinite so the loop is a plain
// integer OR-reduction that vectorises (and survives -ffast-math); it works on f32, bf16 and f16.
#include <cstdint>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "ops/elem.hpp"
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
  const OpCheck check(Op::add);
  check.usable_image("c", c).usable_image("a", a).usable_image("b", b);
  check.same_layout("a", a, "c", c).same_layout("b", b, "c", c);
  check.float_dtype("c", c).dtype("a", a, c.dtype()).dtype("b", b, c.dtype());
  check.same_shape("a", a, "c", c).same_shape("b", b, "c", c);
  use_our_threads();
  with_float_dtype(c.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(c.data());
    const T* x = static_cast<const T*>(a.data());
    const T* y = static_cast<const T*>(b.data());
    parallel_for(c.numel(), [&](std::int64_t i) { out[i] = E::store(E::load(x[i]) + E::load(y[i])); });
  });
}

void CpuBackend::scale(const Tensor& t, float factor) {
  const OpCheck check(Op::scale);
  check.usable_image("t", t).float_dtype("t", t);
  use_our_threads();
  with_float_dtype(t.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* p = static_cast<T*>(t.data());
    parallel_for(t.numel(), [&](std::int64_t i) { p[i] = E::store(E::load(p[i]) * factor); });
  });
}

void CpuBackend::check_finite(const Tensor& flag, const Tensor& t) {
  const OpCheck check(Op::check_finite);
  check.usable("flag", flag).usable_image("t", t).dtype("flag", flag, DType::i32);
  if (flag.numel() != 1) check.fail(fmt::format("flag is {} but must have one element", flag.describe()));
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
      check.fail(fmt::format("t is {} but must be f32, bf16 or f16", t.describe()));
  }
  if (found != 0) *flag.data_as<std::int32_t>() = 1;
}

}  // namespace kiln::cpu
