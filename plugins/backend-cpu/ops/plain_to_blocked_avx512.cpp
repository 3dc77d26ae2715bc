// The AVX-512 kernels of the plain -> blocked weight copy (plain_to_blocked_avx512.hpp; the
// layout analysis, dispatch and scalar fallback are in plain_to_blocked.cpp). Every function
// here carries its own target attribute (as f16_convert.cpp's), so this file builds without
// -mavx512* and only runs where PlainToBlocked found AVX-512 at run time.
#include "ops/plain_to_blocked_avx512.hpp"

#include <immintrin.h>

#include <type_traits>

namespace kiln::cpu::plain_to_blocked_avx512 {

bool has_avx512() noexcept {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and trip -W(maybe-)uninitialized
// when inlined into a target-attribute function; nothing here reads an undefined lane.
#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only warning; clang warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

/// to_bf16 on 16 lanes of f32 bits.
KILN_AVX512 inline __m256i to_bf16_x16(__m512i u) {
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 tiny = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(0x00800000));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i high = _mm512_srli_epi32(u, 16);
  r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(high, _mm512_set1_epi32(0x8000)));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x0040)));
  return _mm512_cvtepi32_epi16(r);
}

/// columns: r[c] = column c of the 16x16 matrix of 32-bit values whose row k is r[k]. The loops
/// here are unrolled explicitly: rolled, GCC keeps r[] and t[] in memory (at -O2 the whole pull
/// ran ~1.6x slower than with them in registers).
KILN_AVX512 inline void transpose16(__m512i* r) {
  __m512i t[16];
  #pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // Rows 4g..4g+3 of column 4L + k now lie in 128-bit lane L of r[4g + k].
  #pragma GCC unroll 16
  for (int g = 0; g < 4; ++g) {
    r[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  #pragma GCC unroll 16
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x88);       // g0, g1: columns k, 8 + k
    t[4 + k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xdd);   // g0, g1: columns 4 + k, 12 + k
    t[8 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xdd);
  }
  #pragma GCC unroll 16
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0xdd);
    r[4 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0x88);
    r[12 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0xdd);
  }
}

}  // namespace

// ---- gathers: one inner block, 16 elements per step, a masked last step ----------------------
// A bf16 source is gathered as 32-bit words at the element's address and narrowed to the low
// half, so a block may read 2 bytes past its last element: PlainToBlocked::block only calls
// this where that stays inside the source (src_off + max_offset_ + 1 < source elements).
template <class S, class D>
KILN_AVX512 void gather_block(const S* src, const std::int32_t* offset, std::int64_t k_total, D* dst) {
  for (std::int64_t k = 0; k < k_total; k += 16) {
    const __mmask16 m = k_total - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k_total - k)) - 1);
    const __m512i idx = _mm512_maskz_loadu_epi32(m, offset + k);
    // 32-bit lanes: f32 elements, or bf16 elements in the low half (scale 2: element addresses).
    const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, src, static_cast<int>(sizeof(S)));
    if constexpr (std::is_same_v<S, float> && std::is_same_v<D, float>) {
      _mm512_mask_storeu_epi32(dst + k, m, v);
    } else if constexpr (std::is_same_v<S, float>) {
      _mm256_mask_storeu_epi16(dst + k, m, to_bf16_x16(v));
    } else if constexpr (std::is_same_v<D, float>) {
      _mm512_mask_storeu_epi32(dst + k, m, _mm512_slli_epi32(v, 16));
    } else {
      _mm256_mask_storeu_epi16(dst + k, m, _mm512_cvtepi32_epi16(v));
    }
  }
}

// bf16 travels as its 16 bits (std::uint16_t); every dtype pair PlainToBlocked converts.
template void gather_block<float, float>(const float*, const std::int32_t*, std::int64_t, float*);
template void gather_block<float, std::uint16_t>(const float*, const std::int32_t*, std::int64_t, std::uint16_t*);
template void gather_block<std::uint16_t, float>(const std::uint16_t*, const std::int32_t*, std::int64_t, float*);
template void gather_block<std::uint16_t, std::uint16_t>(const std::uint16_t*, const std::int32_t*, std::int64_t,
                                                         std::uint16_t*);

KILN_AVX512 void row_pairs_block(const std::uint16_t* src, std::int64_t row_stride, std::uint16_t* dst) {
  for (int p = 0; p < 8; ++p) {
    const std::uint16_t* a = src + 2 * p * row_stride;
    const __m256i ra = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
    const __m256i rb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + row_stride));
    // Within each 128-bit lane: lo = a0 b0 .. a3 b3 | a8 b8 .. a11 b11, hi = a4 b4 .. | a12 b12 ..
    const __m256i lo = _mm256_unpacklo_epi16(ra, rb), hi = _mm256_unpackhi_epi16(ra, rb);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * p), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * p + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

KILN_AVX512 void column_tile(const std::uint32_t* src, std::int64_t row_stride, std::int64_t rows, std::int64_t j0,
                             std::int64_t columns, const std::int64_t* column_dst, std::uint32_t* dst) {
  const __mmask16 m = columns >= 16 ? __mmask16(0xffff) : __mmask16((1u << columns) - 1);
  __m512i r[16];
  #pragma GCC unroll 16
  for (std::int64_t k = 0; k < 16; ++k) {
    r[k] = k < rows ? _mm512_maskz_loadu_epi32(m, src + k * row_stride + j0) : _mm512_setzero_si512();
  }
  transpose16(r);
  #pragma GCC unroll 16
  for (std::int64_t c = 0; c < columns; ++c) _mm512_storeu_si512(dst + column_dst[j0 + c], r[c]);
}

KILN_AVX512 void pair_tile(const std::uint16_t* lo, std::int64_t row_stride, std::int64_t partner, std::int64_t rows,
                           std::int64_t columns, const std::int64_t* column_dst, std::uint32_t* dst) {
  const __mmask16 m = columns >= 16 ? __mmask16(0xffff) : __mmask16((1u << columns) - 1);
  __m512i r[16];
  #pragma GCC unroll 16
  for (std::int64_t k = 0; k < 16; ++k) {
    if (k >= rows) {
      r[k] = _mm512_setzero_si512();
      continue;
    }
    const std::uint16_t* row = lo + k * row_stride;
    const __m512i even = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row));
    const __m512i odd = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + partner));
    r[k] = _mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
  }
  transpose16(r);
  #pragma GCC unroll 16
  for (std::int64_t c = 0; c < columns; ++c) _mm512_storeu_si512(dst + column_dst[c], r[c]);
}

#pragma GCC diagnostic pop

}  // namespace kiln::cpu::plain_to_blocked_avx512
