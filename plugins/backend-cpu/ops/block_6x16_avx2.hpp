// The 6 x 16 block of f32 sums that Kiln's AVX2 GEMM-like kernels keep in registers
// (gemm_tn_avx2.cpp, conv_direct_avx2.cpp): 6 rows of 16 columns, twelve AVX2 accumulators
// updated by one broadcast per row and two vector loads per step, which is 12 FMAs against 8
// loads, as many as Zen 2's two FMA pipes retire while its load ports keep up. The accumulators
// are named members, not an array: in an array GCC 12 stored them to the stack on every step
// (55 instead of ~100 GFLOP/s per core).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {

struct Block6x16 {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;

  /// All zeros. (The translation units around may be built without AVX: every member function
  /// carries its own target.)
  __attribute__((target("avx2,fma"), always_inline)) Block6x16() {
    c00 = _mm256_setzero_ps();
    c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = c00;
  }

  /// Row i += a[i] * (b0, b1), i < 6, with a[i] read from *a0 .. *a5.
  __attribute__((target("avx2,fma"), always_inline)) void add(__m256 b0, __m256 b1, const float* a0, const float* a1,
                                                              const float* a2, const float* a3, const float* a4,
                                                              const float* a5) {
    __m256 a = _mm256_broadcast_ss(a0);
    c00 = _mm256_fmadd_ps(a, b0, c00);
    c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(a1);
    c10 = _mm256_fmadd_ps(a, b0, c10);
    c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(a2);
    c20 = _mm256_fmadd_ps(a, b0, c20);
    c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(a3);
    c30 = _mm256_fmadd_ps(a, b0, c30);
    c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(a4);
    c40 = _mm256_fmadd_ps(a, b0, c40);
    c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(a5);
    c50 = _mm256_fmadd_ps(a, b0, c50);
    c51 = _mm256_fmadd_ps(a, b1, c51);
  }

  /// Writes (or, `add`, adds) rows [0, rows) to out_row(i)[0..16).
  template <class OutRow>
  __attribute__((target("avx2,fma"), always_inline)) void store(std::int64_t rows, OutRow&& out_row, bool add) const {
    const __m256 sums[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (std::int64_t i = 0; i < rows; ++i) {
      float* o = out_row(i);
      __m256 lo = sums[i][0], hi = sums[i][1];
      if (add) {
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(o));
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(o + 8));
      }
      _mm256_storeu_ps(o, lo);
      _mm256_storeu_ps(o + 8, hi);
    }
  }
};

}  // namespace kiln::cpu
