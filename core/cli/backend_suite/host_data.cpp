// Host rounding, random inputs and layout byte images for the conformance suite (see header).
#include "host_data.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#if defined(__clang__) && __clang_major__ < 15
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kiln::conformance {
namespace {

std::uint16_t bf16_bits(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return 0x7fc0;
  // Round to nearest even on the 16 bits that are dropped.
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

float bf16_value(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

// IEEE half conversions that are not Kiln's code, to check the backends' against: the compiler's
// _Float16, or, in clang before 15 (no _Float16 on x86 without AVX512-FP16, and its __fp16 calls
// compiler-rt helpers that libgcc lacks), the CPU's F16C instructions, round to nearest even.
#if defined(__clang__) && __clang_major__ < 15

bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

void require_f16c() {
  static const bool has = cpu_has_f16c();
  if (!has) throw std::runtime_error("the clang < 15 build's f16 reference needs a CPU with F16C");
}

// _cvtss_sh is a macro whose expansion builds a vector with a compound literal, which the core's
// -Wpedantic flags in clang (the test build that compiled this before did not use it).
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
__attribute__((target("f16c"))) std::uint16_t f16c_bits(float f) {
  return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
#pragma clang diagnostic pop
__attribute__((target("f16c"))) float f16c_value(std::uint16_t bits) { return _cvtsh_ss(bits); }

std::uint16_t f16_bits(float f) { return require_f16c(), f16c_bits(f); }
float f16_value(std::uint16_t bits) { return require_f16c(), f16c_value(bits); }

#else

std::uint16_t f16_bits(float f) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f)); }

float f16_value(std::uint16_t b) { return static_cast<float>(std::bit_cast<_Float16>(b)); }

#endif

/// Element offset of logical index `i` of `shape` in `layout`.
std::int64_t physical_index(std::int64_t i, const Shape& shape, Layout layout) {
  if (layout == Layout::row_major) return i;
  if (layout != Layout::nhwc || shape.size() != 4) {
    throw std::invalid_argument("conformance: layout nhwc needs a rank-4 shape, got " + shape_string(shape));
  }
  const std::int64_t c = shape[1], h = shape[2], w = shape[3];
  const std::int64_t wi = i % w, hi = (i / w) % h, ci = (i / (w * h)) % c, ni = i / (w * h * c);
  return ((ni * h + hi) * w + wi) * c + ci;
}

}  // namespace

double round_to(DType dtype, double v) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(v);
    case DType::bf16: return bf16_value(bf16_bits(static_cast<float>(v)));
    case DType::f16: return f16_value(f16_bits(static_cast<float>(v)));
    default: return v;
  }
}

std::vector<double> rounded(DType dtype, std::vector<double> v) {
  for (double& x : v) x = round_to(dtype, x);
  return v;
}

std::vector<double> uniform(Rng& rng, std::size_t n, double lo, double hi, DType dtype) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(n);
  bool any_nonzero = false;
  for (double& x : out) {
    x = round_to(dtype, dist(rng));
    any_nonzero = any_nonzero || x != 0.0;
  }
  if (!any_nonzero && n > 0) out[0] = round_to(dtype, hi == 0.0 ? lo : hi * 0.5);
  return out;
}

std::vector<double> integers(Rng& rng, std::size_t n, std::int64_t bound) {
  std::uniform_int_distribution<std::int64_t> dist(0, bound - 1);
  std::vector<double> out(n);
  for (double& x : out) x = static_cast<double>(dist(rng));
  return out;
}

Tensor encode(const std::vector<double>& logical, const Shape& shape, DType dtype, Layout layout) {
  Tensor t = host_tensor(shape, dtype);
  const std::int64_t n = t.numel();
  if (static_cast<std::int64_t>(logical.size()) != n) {
    throw std::invalid_argument("conformance: " + std::to_string(logical.size()) +
                                " values for a tensor of shape " + shape_string(shape));
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t p = physical_index(i, shape, layout);
    const double v = logical[static_cast<std::size_t>(i)];
    switch (dtype) {
      case DType::f32: t.data_as<float>()[p] = static_cast<float>(v); break;
      case DType::bf16: static_cast<std::uint16_t*>(t.data())[p] = bf16_bits(static_cast<float>(v)); break;
      case DType::f16: static_cast<std::uint16_t*>(t.data())[p] = f16_bits(static_cast<float>(v)); break;
      case DType::f64: t.data_as<double>()[p] = v; break;
      case DType::i32: t.data_as<std::int32_t>()[p] = static_cast<std::int32_t>(v); break;
      case DType::i64: t.data_as<std::int64_t>()[p] = static_cast<std::int64_t>(v); break;
      case DType::u8: t.data_as<std::uint8_t>()[p] = static_cast<std::uint8_t>(v); break;
    }
  }
  return t;
}

std::vector<double> decode(const Tensor& bytes, const Shape& shape, Layout layout) {
  const std::int64_t n = shape_numel(shape);
  std::vector<double> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t p = physical_index(i, shape, layout);
    double v = 0.0;
    switch (bytes.dtype()) {
      case DType::f32: v = bytes.data_as<float>()[p]; break;
      case DType::bf16: v = bf16_value(static_cast<const std::uint16_t*>(bytes.data())[p]); break;
      case DType::f16: v = f16_value(static_cast<const std::uint16_t*>(bytes.data())[p]); break;
      case DType::f64: v = bytes.data_as<double>()[p]; break;
      case DType::i32: v = bytes.data_as<std::int32_t>()[p]; break;
      case DType::i64: v = static_cast<double>(bytes.data_as<std::int64_t>()[p]); break;
      case DType::u8: v = bytes.data_as<std::uint8_t>()[p]; break;
    }
    out[static_cast<std::size_t>(i)] = v;
  }
  return out;
}

Tensor poison_image(const Shape& shape, DType dtype) {
  Tensor t = host_tensor(shape, dtype);
  const std::int64_t n = t.numel();
  switch (dtype) {
    case DType::f32:
      for (std::int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
      break;
    case DType::bf16:
    case DType::f16:
      for (std::int64_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(t.data())[i] = 0x7fff;  // NaN in both
      break;
    case DType::f64:
      for (std::int64_t i = 0; i < n; ++i) t.data_as<double>()[i] = std::numeric_limits<double>::quiet_NaN();
      break;
    default: std::memset(t.data(), 0xA5, t.bytes()); break;
  }
  return t;
}

const char* layout_label(Layout layout) {
  switch (layout) {
    case Layout::row_major: return "nchw";
    case Layout::nhwc: return "nhwc";
    default: return "opaque";
  }
}

}  // namespace kiln::conformance
