// bf16 <-> f32 buffers (bf16_convert.hpp): an AVX-512 path (16 lanes, masked tails), an AVX2
// path (16 lanes per step as two 8-lane halves, scalar tail) and the SDK's scalar loop, chosen
// once from cpuid. Each vector path compiles with its own target attribute.
//
// Narrowing is the scalar code's integer rounding done per lane (bf16_lanes_avx2.hpp says how;
// the AVX-512 path below is the same arithmetic on 16 lanes).
#include "ops/bf16_convert.hpp"

#include <immintrin.h>

#include <cstdint>

#include "ops/bf16_lanes_avx2.hpp"
#include "ops/convert_chunks.hpp"
#include "ops/half.hpp"

namespace kiln::cpu {
namespace bf16_paths {

bool has_avx2() noexcept { return __builtin_cpu_supports("avx2"); }

bool has_avx512() noexcept {
  // __builtin_cpu_supports also checks that the OS saves the AVX-512 registers.
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

void bf16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept { sdk::bf16_to_f32(in, out, n); }
void f32_to_bf16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept { sdk::f32_to_bf16(in, out, n); }
void f32_round_to_bf16_scalar(const float* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = sdk::bf16_to_f32(sdk::f32_to_bf16(in[i]));
}

// ---- AVX-512 ---------------------------------------------------------------------------------

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip -Wmaybe-uninitialized
// when inlined into a target-attribute function; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning; clang warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define KILN_BF16_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2")))

/// f32 bits -> bf16 bits in the high 16 bits of each 32-bit lane (low 16 bits not cleared).
KILN_BF16_AVX512 static inline __m512i round16(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
}

KILN_BF16_AVX512 static inline __m512 widen16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

KILN_BF16_AVX512 static inline __m256i narrow16(__m512 f) {
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(round16(_mm512_castps_si512(f)), 16));
}

KILN_BF16_AVX512 static inline __m512 round_in_place16(__m512 f) {
  return _mm512_castsi512_ps(_mm512_and_si512(round16(_mm512_castps_si512(f)), _mm512_set1_epi32(-65536)));
}

KILN_BF16_AVX512 void bf16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, widen16(_mm256_maskz_loadu_epi16(m, in + i)));
  }
}

KILN_BF16_AVX512 void f32_to_bf16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), narrow16(_mm512_loadu_ps(in + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(out + i, m, narrow16(_mm512_maskz_loadu_ps(m, in + i)));
  }
}

KILN_BF16_AVX512 void f32_round_to_bf16_avx512(const float* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, round_in_place16(_mm512_loadu_ps(in + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, round_in_place16(_mm512_maskz_loadu_ps(m, in + i)));
  }
}

#pragma GCC diagnostic pop

// ---- AVX2 ------------------------------------------------------------------------------------

#define KILN_BF16_AVX2 __attribute__((target("avx2")))

using bf16_lanes::narrow16;
using bf16_lanes::widen8;

KILN_BF16_AVX2 void bf16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  sdk::bf16_to_f32(in + i, out + i, n - i);
}

KILN_BF16_AVX2 void f32_to_bf16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        narrow16(_mm256_loadu_ps(in + i), _mm256_loadu_ps(in + i + 8)));
  }
  sdk::f32_to_bf16(in + i, out + i, n - i);
}

KILN_BF16_AVX2 void f32_round_to_bf16_avx2(const float* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, bf16_lanes::round_to_bf16(_mm256_loadu_ps(in + i)));
  }
  f32_round_to_bf16_scalar(in + i, out + i, n - i);
}

}  // namespace bf16_paths

namespace {

using Widen = void (*)(const std::uint16_t*, float*, std::size_t) noexcept;
using Narrow = void (*)(const float*, std::uint16_t*, std::size_t) noexcept;
using Round = void (*)(const float*, float*, std::size_t) noexcept;

struct Paths {
  Widen widen;
  Narrow narrow;
  Round round;
  const char* isa;
};

const Paths& paths() {
  static const Paths chosen = [] {
    using namespace bf16_paths;
    if (has_avx512()) return Paths{bf16_to_f32_avx512, f32_to_bf16_avx512, f32_round_to_bf16_avx512, "avx512"};
    if (has_avx2()) return Paths{bf16_to_f32_avx2, f32_to_bf16_avx2, f32_round_to_bf16_avx2, "avx2"};
    return Paths{bf16_to_f32_scalar, f32_to_bf16_scalar, f32_round_to_bf16_scalar, "scalar"};
  }();
  return chosen;
}

}  // namespace

const char* bf16_convert_isa() noexcept { return paths().isa; }

void bf16_to_f32_n(const std::uint16_t* in, float* out, std::size_t n) noexcept { paths().widen(in, out, n); }
void f32_to_bf16_n(const float* in, std::uint16_t* out, std::size_t n) noexcept { paths().narrow(in, out, n); }
void f32_round_to_bf16_n(const float* in, float* out, std::size_t n) noexcept { paths().round(in, out, n); }

void bf16_to_f32_parallel(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  const Widen widen = paths().widen;
  convert_in_chunks(n, [&](std::size_t begin, std::size_t count) { widen(in + begin, out + begin, count); });
}

void f32_to_bf16_parallel(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  const Narrow narrow = paths().narrow;
  convert_in_chunks(n, [&](std::size_t begin, std::size_t count) { narrow(in + begin, out + begin, count); });
}

void f32_round_to_bf16_parallel(const float* in, float* out, std::size_t n) noexcept {
  const Round round = paths().round;
  convert_in_chunks(n, [&](std::size_t begin, std::size_t count) { round(in + begin, out + begin, count); });
}

}  // namespace kiln::cpu
