// f16 <-> f32 buffers (f16_convert.hpp): an AVX-512 path (16 lanes, masked tails), an AVX2+F16C
// path (8 lanes, scalar tail) and the SDK's scalar loop, chosen once from cpuid. Each vector path
// compiles with its own target attribute, so the plugin's -march does not decide which exist.
//
// The hardware rounds like the scalar code (nearest even, subnormals exact, overflow to inf; the
// F16C instructions ignore MXCSR's DAZ/FTZ for the f16 side). Only NaNs differ: vcvtph2ps quiets
// a signalling NaN and vcvtps2ph keeps payload bits, while the scalar code keeps f16 payloads
// exactly and writes one quiet f16 NaN. NaN lanes are rewritten to the scalar result (a compare
// and a blend, usually not even taken), so every path agrees bit for bit.
#include "ops/f16_convert.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/cpu_avx2_f16c.hpp"
#include "ops/half.hpp"
#include "ops/convert_chunks.hpp"

namespace kiln::cpu {
namespace f16_paths {

bool has_avx2_f16c() noexcept { return cpu_has_avx2_fma_f16c(); }

bool has_avx512() noexcept {
  // __builtin_cpu_supports also checks that the OS saves the AVX-512 registers.
  return has_avx2_f16c() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

void f16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept { sdk::f16_to_f32(in, out, n); }
void f32_to_f16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept { sdk::f32_to_f16(in, out, n); }

// ---- AVX-512 ---------------------------------------------------------------------------------

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip -Wmaybe-uninitialized
// when inlined into a target-attribute function; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning; clang warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

KILN_AVX512 static inline __m512 widen16(__m256i h) {
  __m512 f = _mm512_cvtph_ps(h);
  const __m512i wide = _mm512_cvtepu16_epi32(h);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(wide, _mm512_set1_epi32(0x7fff)), _mm512_set1_epi32(0x7c00));
  if (nan != 0) {
    // sign | all-ones exponent | payload << 13, as the scalar conversion writes it.
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(wide, _mm512_set1_epi32(0x8000)), 16);
    const __m512i payload = _mm512_slli_epi32(_mm512_and_si512(wide, _mm512_set1_epi32(0x3ff)), 13);
    const __m512i bits = _mm512_or_si512(_mm512_or_si512(sign, payload), _mm512_set1_epi32(0x7f800000));
    f = _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(bits));
  }
  return f;
}

KILN_AVX512 static inline __m256i narrow16(__m512 f) {
  __m256i h = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  if (nan != 0) {
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(f), 16), _mm512_set1_epi32(0x8000));
    const __m256i quiet = _mm512_cvtepi32_epi16(_mm512_or_si512(sign, _mm512_set1_epi32(0x7e00)));
    h = _mm256_mask_blend_epi16(nan, h, quiet);
  }
  return h;
}

KILN_AVX512 void f16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, widen16(_mm256_maskz_loadu_epi16(m, in + i)));
  }
}

KILN_AVX512 void f32_to_f16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), narrow16(_mm512_loadu_ps(in + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(out + i, m, narrow16(_mm512_maskz_loadu_ps(m, in + i)));
  }
}

#pragma GCC diagnostic pop

// ---- AVX2 + F16C -----------------------------------------------------------------------------

#define KILN_AVX2 __attribute__((target("avx2,fma,f16c")))

KILN_AVX2 static inline __m256 widen8(__m128i h) {
  __m256 f = _mm256_cvtph_ps(h);
  const __m256i wide = _mm256_cvtepu16_epi32(h);
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x7fff)), _mm256_set1_epi32(0x7c00));
  if (_mm256_movemask_epi8(nan) != 0) {
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x8000)), 16);
    const __m256i payload = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x3ff)), 13);
    const __m256i bits = _mm256_or_si256(_mm256_or_si256(sign, payload), _mm256_set1_epi32(0x7f800000));
    f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
  }
  return f;
}

KILN_AVX2 static inline __m128i narrow8(__m256 f) {
  __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
  if (_mm256_movemask_ps(nan) != 0) {
    const __m256i sign =
        _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(f), 16), _mm256_set1_epi32(0x8000));
    const __m256i quiet32 = _mm256_or_si256(sign, _mm256_set1_epi32(0x7e00));
    // 32-bit lanes -> 16-bit lanes (values and masks), in order.
    const __m128i quiet = _mm_packus_epi32(_mm256_castsi256_si128(quiet32), _mm256_extracti128_si256(quiet32, 1));
    const __m256i nan32 = _mm256_castps_si256(nan);
    const __m128i mask = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    h = _mm_blendv_epi8(h, quiet, mask);
  }
  return h;
}

KILN_AVX2 void f16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  sdk::f16_to_f32(in + i, out + i, n - i);
}

KILN_AVX2 void f32_to_f16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), narrow8(_mm256_loadu_ps(in + i)));
  }
  sdk::f32_to_f16(in + i, out + i, n - i);
}

}  // namespace f16_paths

namespace {

using Widen = void (*)(const std::uint16_t*, float*, std::size_t) noexcept;
using Narrow = void (*)(const float*, std::uint16_t*, std::size_t) noexcept;

struct Paths {
  Widen widen;
  Narrow narrow;
  const char* isa;
};

const Paths& paths() {
  static const Paths chosen = [] {
    using namespace f16_paths;
    if (has_avx512()) return Paths{f16_to_f32_avx512, f32_to_f16_avx512, "avx512"};
    if (has_avx2_f16c()) return Paths{f16_to_f32_avx2, f32_to_f16_avx2, "avx2+f16c"};
    return Paths{f16_to_f32_scalar, f32_to_f16_scalar, "scalar"};
  }();
  return chosen;
}

}  // namespace

const char* f16_convert_isa() noexcept { return paths().isa; }

void f16_to_f32_n(const std::uint16_t* in, float* out, std::size_t n) noexcept { paths().widen(in, out, n); }
void f32_to_f16_n(const float* in, std::uint16_t* out, std::size_t n) noexcept { paths().narrow(in, out, n); }

void f16_to_f32_parallel(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  const Widen widen = paths().widen;
  convert_in_chunks(n, [&](std::size_t begin, std::size_t count) { widen(in + begin, out + begin, count); });
}

void f32_to_f16_parallel(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  const Narrow narrow = paths().narrow;
  convert_in_chunks(n, [&](std::size_t begin, std::size_t count) { narrow(in + begin, out + begin, count); });
}

}  // namespace kiln::cpu
