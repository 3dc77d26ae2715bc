// bf16 <-> f32 on eight AVX2 lanes, shared by the whole-buffer loops (bf16_convert.cpp) and the
// Winograd tile transforms (winograd_transforms.cpp), so every bf16 value this backend writes is
// rounded the same way, bit for bit the SDK's scalar conversion (kiln/sdk/half.hpp).
//
// Narrowing is the scalar code's integer rounding done per lane: add 0x7fff plus the lowest kept
// bit (ties to even), keep the top 16 bits; a NaN lane (|u| > 0x7f800000) instead keeps its top
// 16 bits with the quiet bit (0x0040 of the bf16) set. Finite values that round past the largest
// bf16 carry into the exponent and become inf, as in the scalar code. No FP instruction is
// involved, so DAZ/FTZ cannot change subnormals. Callers must have checked the CPU has AVX2; the
// functions carry the target attribute themselves, so any file may include this header.
#pragma once

#include <immintrin.h>

#define KILN_BF16_LANES __attribute__((target("avx2"), always_inline)) inline

namespace kiln::cpu::bf16_lanes {

/// The f32 bit patterns in u rounded to bf16 (the kept bits are the top 16; the low 16 are junk).
KILN_BF16_LANES __m256i round8(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  // |u| and 0x7f800000 are both below 2^31, so the signed compare is the unsigned one.
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
}

/// 8 bf16 -> 8 f32 (exact: the 16-bit shift).
KILN_BF16_LANES __m256 widen8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

/// 8 f32 -> 8 bf16, rounded to nearest even.
KILN_BF16_LANES __m128i narrow8(__m256 v) {
  const __m256i top = _mm256_srli_epi32(round8(_mm256_castps_si256(v)), 16);
  // packus works per 128-bit lane: [t0-3 t0-3 | t4-7 t4-7]; qwords 0 and 2 are t0-7 in order.
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(top, top), _MM_SHUFFLE(3, 1, 2, 0)));
}

/// 16 f32 -> 16 bf16: both halves rounded, shifted down, packed in order.
KILN_BF16_LANES __m256i narrow16(__m256 lo, __m256 hi) {
  const __m256i a = _mm256_srli_epi32(round8(_mm256_castps_si256(lo)), 16);
  const __m256i b = _mm256_srli_epi32(round8(_mm256_castps_si256(hi)), 16);
  // packus works per 128-bit lane: [a0-3 b0-3 | a4-7 b4-7]; the permute restores a0-7 b0-7.
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
}

/// 8 f32 rounded to bf16 precision, kept in f32 (what a bf16 primitive reads of an f32 input).
KILN_BF16_LANES __m256 round_to_bf16(__m256 v) {
  return _mm256_castsi256_ps(_mm256_and_si256(round8(_mm256_castps_si256(v)), _mm256_set1_epi32(-65536)));
}

}  // namespace kiln::cpu::bf16_lanes

#undef KILN_BF16_LANES
