// The Winograd F(4x4, 3x3) tile and filter transforms (see winograd_transforms.hpp). The 1-D
// transforms are written out with the matrices' zeros and repeated coefficients folded in; a 2-D
// transform is the 1-D one down the columns, then along the rows.
#include "ops/winograd_transforms.hpp"

#include <immintrin.h>

#include <algorithm>

#include "ops/bf16_lanes_avx2.hpp"

#define KILN_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace kiln::cpu::winograd {
namespace {

using v8 = __m256;

// --- 1-D transforms on 8 lanes -------------------------------------------------------------

/// B^T d: the input transform.
///   [4  0 -5  0 1 0]   [0 -4 -4  1 1 0]   [0  4 -4 -1 1 0]
///   [0 -2 -1  2 1 0]   [0  2 -1 -2 1 0]   [0  4  0 -5 0 1]
KILN_AVX2 inline void input_1d(const v8 d[6], v8 o[6]) {
  const v8 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
  o[0] = _mm256_fmadd_ps(four, d[0], _mm256_fnmadd_ps(five, d[2], d[4]));
  o[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
  o[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
  o[3] = _mm256_fmadd_ps(two, _mm256_sub_ps(d[3], d[1]), _mm256_sub_ps(d[4], d[2]));
  o[4] = _mm256_fmadd_ps(two, _mm256_sub_ps(d[1], d[3]), _mm256_sub_ps(d[4], d[2]));
  o[5] = _mm256_fmadd_ps(four, d[1], _mm256_fnmadd_ps(five, d[3], d[5]));
}

/// A^T m: the output transform.
///   [1 1  1 1  1 0]   [0 1 -1 2 -2 0]   [0 1 1 4 4 0]   [0 1 -1 8 -8 1]
KILN_AVX2 inline void output_1d(const v8 m[6], v8 y[4]) {
  const v8 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
  const v8 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
  y[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d34, d12);
  y[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), s34, s12);
  y[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d34, d12), m[5]);
}

/// A dy: the adjoint of output_1d (A = (A^T)^T, 6x4).
KILN_AVX2 inline void output_adjoint_1d(const v8 dy[4], v8 o[6]) {
  const v8 s02 = _mm256_add_ps(dy[0], dy[2]), s13 = _mm256_add_ps(dy[1], dy[3]);
  const v8 t02 = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), dy[2], dy[0]);
  const v8 t13 = _mm256_fmadd_ps(_mm256_set1_ps(8.0f), dy[3], _mm256_add_ps(dy[1], dy[1]));
  o[0] = dy[0];
  o[1] = _mm256_add_ps(s02, s13);
  o[2] = _mm256_sub_ps(s02, s13);
  o[3] = _mm256_add_ps(t02, t13);
  o[4] = _mm256_sub_ps(t02, t13);
  o[5] = dy[3];
}

/// G g: the filter transform.
///   [1/4 0 0]  [-1/6 -1/6 -1/6]  [-1/6 1/6 -1/6]  [1/24 1/12 1/6]  [1/24 -1/12 1/6]  [0 0 1]
KILN_AVX2 inline void filter_1d(const v8 g[3], v8 u[6]) {
  const v8 sixth = _mm256_set1_ps(1.0f / 6.0f);
  const v8 s = _mm256_add_ps(g[0], g[2]);
  const v8 t = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 24.0f), g[0], _mm256_mul_ps(sixth, g[2]));
  const v8 h = _mm256_mul_ps(_mm256_set1_ps(1.0f / 12.0f), g[1]);
  u[0] = _mm256_mul_ps(_mm256_set1_ps(0.25f), g[0]);
  u[1] = _mm256_mul_ps(_mm256_set1_ps(-1.0f / 6.0f), _mm256_add_ps(s, g[1]));
  u[2] = _mm256_mul_ps(_mm256_set1_ps(-1.0f / 6.0f), _mm256_sub_ps(s, g[1]));
  u[3] = _mm256_add_ps(t, h);
  u[4] = _mm256_sub_ps(t, h);
  u[5] = g[2];
}

/// G^T u: the adjoint of filter_1d.
KILN_AVX2 inline void filter_adjoint_1d(const v8 u[6], v8 g[3]) {
  const v8 s12 = _mm256_add_ps(u[1], u[2]), d21 = _mm256_sub_ps(u[2], u[1]);
  const v8 s34 = _mm256_add_ps(u[3], u[4]), d34 = _mm256_sub_ps(u[3], u[4]);
  const v8 sixth = _mm256_set1_ps(1.0f / 6.0f);
  const v8 minus_s12_6 = _mm256_mul_ps(_mm256_set1_ps(-1.0f / 6.0f), s12);
  g[0] = _mm256_fmadd_ps(_mm256_set1_ps(0.25f), u[0], _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 24.0f), s34, minus_s12_6));
  g[1] = _mm256_fmadd_ps(sixth, d21, _mm256_mul_ps(_mm256_set1_ps(1.0f / 12.0f), d34));
  g[2] = _mm256_fmadd_ps(sixth, _mm256_sub_ps(s34, s12), u[5]);
}

// --- 2-D transforms: down the columns, then along the rows -------------------------------

/// o = B^T d B for a 6x6 tile d[row][col].
KILN_AVX2 inline void input_2d(const v8 d[6][6], v8 o[6][6]) {
  v8 col[6], t[6][6];
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 6; ++i) col[i] = d[i][j];
    v8 out[6];
    input_1d(col, out);
    for (int i = 0; i < 6; ++i) t[i][j] = out[i];
  }
  for (int i = 0; i < 6; ++i) input_1d(t[i], o[i]);
}

/// y = A^T m A for a 6x6 tile m.
KILN_AVX2 inline void output_2d(const v8 m[6][6], v8 y[4][4]) {
  v8 col[6], t[4][6];
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 6; ++i) col[i] = m[i][j];
    v8 out[4];
    output_1d(col, out);
    for (int i = 0; i < 4; ++i) t[i][j] = out[i];
  }
  for (int i = 0; i < 4; ++i) output_1d(t[i], y[i]);
}

/// o = A dy A^T for a 4x4 tile dy.
KILN_AVX2 inline void output_adjoint_2d(const v8 dy[4][4], v8 o[6][6]) {
  v8 col[4], t[6][4];
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 4; ++i) col[i] = dy[i][j];
    v8 out[6];
    output_adjoint_1d(col, out);
    for (int i = 0; i < 6; ++i) t[i][j] = out[i];
  }
  for (int i = 0; i < 6; ++i) output_adjoint_1d(t[i], o[i]);
}

/// u = G g G^T for a 3x3 filter g.
KILN_AVX2 inline void filter_2d(const v8 g[3][3], v8 u[6][6]) {
  v8 col[3], t[6][3];
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 3; ++i) col[i] = g[i][j];
    v8 out[6];
    filter_1d(col, out);
    for (int i = 0; i < 6; ++i) t[i][j] = out[i];
  }
  for (int i = 0; i < 6; ++i) filter_1d(t[i], u[i]);
}

/// g = G^T u G for a 6x6 tile u.
KILN_AVX2 inline void filter_adjoint_2d(const v8 u[6][6], v8 g[3][3]) {
  v8 col[6], t[3][6];
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < 6; ++i) col[i] = u[i][j];
    v8 out[3];
    filter_adjoint_1d(col, out);
    for (int i = 0; i < 3; ++i) t[i][j] = out[i];
  }
  for (int i = 0; i < 3; ++i) filter_adjoint_1d(t[i], g[i]);
}

// --- 8 activations in, 8 out: f32, or f16 (F16C) and bf16 widened and narrowed on the way ---

KILN_AVX2 inline v8 load8(const float* p) { return _mm256_loadu_ps(p); }
KILN_AVX2 inline v8 load8(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
KILN_AVX2 inline v8 load8(const Bf16* p) {
  return bf16_lanes::widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
KILN_AVX2 inline v8 load8(const F32AsBf16* p) {
  return bf16_lanes::round_to_bf16(_mm256_loadu_ps(reinterpret_cast<const float*>(p)));
}
KILN_AVX2 inline void store8(float* p, v8 v) { _mm256_storeu_ps(p, v); }
/// Round to nearest even, as the SDK's scalar f32 -> f16 and f32 -> bf16 (kiln/sdk/half.hpp)
/// and the backend's other conversion loops do.
KILN_AVX2 inline void store8(std::uint16_t* p, v8 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
KILN_AVX2 inline void store8(Bf16* p, v8 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), bf16_lanes::narrow8(v)); }

// --- per-tile and per-filter-block bodies ------------------------------------------------

struct TilePos {
  std::int64_t n, y0, x0;  // image, and the tile's first output row and column
};

TilePos tile_pos(const TileGrid& g, std::int64_t t) {
  const std::int64_t th = g.tiles_h(), tw = g.tiles_w();
  return {t / (th * tw), (t / tw) % th * kOutputTile, t % tw * kOutputTile};
}

template <class T>
KILN_AVX2 void input_tile(const T* x, std::int64_t c, const TileGrid& g, std::int64_t t, float* v) {
  const TilePos pos = tile_pos(g, t);
  const std::int64_t row0 = pos.y0 - g.pad, col0 = pos.x0 - g.pad, points = g.tiles() * c;
  const T* image = x + pos.n * g.in_h * g.in_w * c;
  // Which of the tile's rows and columns lie inside the input (the rest read as zeros).
  bool row_in[6], col_in[6];
  for (int i = 0; i < 6; ++i) {
    row_in[i] = row0 + i >= 0 && row0 + i < g.in_h;
    col_in[i] = col0 + i >= 0 && col0 + i < g.in_w;
  }
  float* out = v + t * c;
  for (std::int64_t ch = 0; ch < c; ch += 8) {
    v8 d[6][6], o[6][6];
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 6; ++j) {
        d[i][j] = row_in[i] && col_in[j] ? load8(image + ((row0 + i) * g.in_w + col0 + j) * c + ch)
                                         : _mm256_setzero_ps();
      }
    }
    input_2d(d, o);
    for (int p = 0; p < kPoints; ++p) _mm256_storeu_ps(out + p * points + ch, o[p / 6][p % 6]);
  }
}

template <class T>
KILN_AVX2 void output_tile(const float* m, std::int64_t k, const TileGrid& g, std::int64_t t, T* y) {
  const TilePos pos = tile_pos(g, t);
  const std::int64_t points = g.tiles() * k;
  const std::int64_t rows = std::min<std::int64_t>(kOutputTile, g.out_h - pos.y0);
  const std::int64_t cols = std::min<std::int64_t>(kOutputTile, g.out_w - pos.x0);
  T* image = y + pos.n * g.out_h * g.out_w * k;
  const float* in = m + t * k;
  for (std::int64_t ch = 0; ch < k; ch += 8) {
    v8 mm[6][6], o[4][4];
    for (int p = 0; p < kPoints; ++p) mm[p / 6][p % 6] = _mm256_loadu_ps(in + p * points + ch);
    output_2d(mm, o);
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) {
        store8(image + ((pos.y0 + i) * g.out_w + pos.x0 + j) * k + ch, o[i][j]);
      }
    }
  }
}

template <class T>
KILN_AVX2 void output_adjoint_tile(const T* dy, std::int64_t k, const TileGrid& g, std::int64_t t, float* dm) {
  const TilePos pos = tile_pos(g, t);
  const std::int64_t points = g.tiles() * k;
  const std::int64_t rows = std::min<std::int64_t>(kOutputTile, g.out_h - pos.y0);
  const std::int64_t cols = std::min<std::int64_t>(kOutputTile, g.out_w - pos.x0);
  const T* image = dy + pos.n * g.out_h * g.out_w * k;
  float* out = dm + t * k;
  for (std::int64_t ch = 0; ch < k; ch += 8) {
    v8 d[4][4], o[6][6];
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        d[i][j] = i < rows && j < cols ? load8(image + ((pos.y0 + i) * g.out_w + pos.x0 + j) * k + ch)
                                       : _mm256_setzero_ps();
      }
    }
    output_adjoint_2d(d, o);
    for (int p = 0; p < kPoints; ++p) _mm256_storeu_ps(out + p * points + ch, o[p / 6][p % 6]);
  }
}

/// The filters of input channel ci, all output channels (forward: u[p][ci][0..k)). The output
/// channels are the inner loop so each point's row u[p][ci] is written whole, line by line; with
/// them outer (8 at a time over all ci) every 64-byte line was written in two halves far apart,
/// and the 512-channel layers' 38 MB of points took twice the memory traffic.
KILN_AVX2 void forward_filter_row(const float* w, std::int64_t k, std::int64_t c, std::int64_t ci, float* u) {
  const std::int64_t stride = c * 9;  // between one output channel's filters and the next one's
  const __m256i lanes = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(static_cast<int>(stride)));
  for (std::int64_t k0 = 0; k0 < k; k0 += 8) {
    const float* first = w + (k0 * c + ci) * 9;
    v8 g[3][3], o[6][6];
    for (int tap = 0; tap < 9; ++tap) g[tap / 3][tap % 3] = _mm256_i32gather_ps(first + tap, lanes, 4);
    filter_2d(g, o);
    for (int p = 0; p < kPoints; ++p) _mm256_storeu_ps(u + (p * c + ci) * k + k0, o[p / 6][p % 6]);
  }
}

/// The rotated filters of output channel ko, input channels c0..c0+7 (backward-data: u[p][ko][ci]).
KILN_AVX2 void backward_data_filter_row(const float* w, std::int64_t k, std::int64_t c, std::int64_t ko, float* u) {
  const __m256i lanes = _mm256_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63);
  for (std::int64_t c0 = 0; c0 < c; c0 += 8) {
    const float* first = w + (ko * c + c0) * 9;
    v8 g[3][3], o[6][6];
    for (int tap = 0; tap < 9; ++tap) g[2 - tap / 3][2 - tap % 3] = _mm256_i32gather_ps(first + tap, lanes, 4);
    filter_2d(g, o);
    for (int p = 0; p < kPoints; ++p) _mm256_storeu_ps(u + (p * k + ko) * c + c0, o[p / 6][p % 6]);
  }
}

/// The gradients of input channel ci, all output channels (dw[k][ci][3][3] from du[p][ci][0..k)):
/// as forward_filter_row, the output channels inner so each row du[p][ci] is read whole.
KILN_AVX2 void filter_gradient_row(const float* du, std::int64_t k, std::int64_t c, std::int64_t ci, float* dw,
                                   bool accumulate) {
  for (std::int64_t k0 = 0; k0 < k; k0 += 8) {
    v8 d[6][6], g[3][3];
    for (int p = 0; p < kPoints; ++p) d[p / 6][p % 6] = _mm256_loadu_ps(du + (p * c + ci) * k + k0);
    filter_adjoint_2d(d, g);
    alignas(32) float taps[9][8];
    for (int tap = 0; tap < 9; ++tap) _mm256_store_ps(taps[tap], g[tap / 3][tap % 3]);
    for (int lane = 0; lane < 8; ++lane) {
      float* out = dw + ((k0 + lane) * c + ci) * 9;
      for (int tap = 0; tap < 9; ++tap) out[tap] = accumulate ? out[tap] + taps[tap][lane] : taps[tap][lane];
    }
  }
}

}  // namespace

template <class T>
void input_tiles(const T* x, std::int64_t c, const TileGrid& grid, float* v) {
  const std::int64_t tiles = grid.tiles();
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < tiles; ++t) input_tile(x, c, grid, t, v);
}
template void input_tiles(const float*, std::int64_t, const TileGrid&, float*);
template void input_tiles(const std::uint16_t*, std::int64_t, const TileGrid&, float*);
template void input_tiles(const Bf16*, std::int64_t, const TileGrid&, float*);
template void input_tiles(const F32AsBf16*, std::int64_t, const TileGrid&, float*);

template <class T>
void output_tiles(const float* m, std::int64_t k, const TileGrid& grid, T* y) {
  const std::int64_t tiles = grid.tiles();
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < tiles; ++t) output_tile(m, k, grid, t, y);
}
template void output_tiles(const float*, std::int64_t, const TileGrid&, float*);
template void output_tiles(const float*, std::int64_t, const TileGrid&, std::uint16_t*);
template void output_tiles(const float*, std::int64_t, const TileGrid&, Bf16*);

template <class T>
void output_tiles_adjoint(const T* dy, std::int64_t k, const TileGrid& grid, float* dm) {
  const std::int64_t tiles = grid.tiles();
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < tiles; ++t) output_adjoint_tile(dy, k, grid, t, dm);
}
template void output_tiles_adjoint(const float*, std::int64_t, const TileGrid&, float*);
template void output_tiles_adjoint(const std::uint16_t*, std::int64_t, const TileGrid&, float*);
template void output_tiles_adjoint(const Bf16*, std::int64_t, const TileGrid&, float*);
template void output_tiles_adjoint(const F32AsBf16*, std::int64_t, const TileGrid&, float*);

void forward_filters(const float* w, std::int64_t k, std::int64_t c, float* u) {
#pragma omp parallel for schedule(static)
  for (std::int64_t ci = 0; ci < c; ++ci) forward_filter_row(w, k, c, ci, u);
}

void backward_data_filters(const float* w, std::int64_t k, std::int64_t c, float* u) {
#pragma omp parallel for schedule(static)
  for (std::int64_t ko = 0; ko < k; ++ko) backward_data_filter_row(w, k, c, ko, u);
}

void filter_gradients(const float* du, std::int64_t k, std::int64_t c, float* dw, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (std::int64_t ci = 0; ci < c; ++ci) filter_gradient_row(du, k, c, ci, dw, accumulate);
}

}  // namespace kiln::cpu::winograd
