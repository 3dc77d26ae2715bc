// The tile transforms of Winograd F(4x4, 3x3) on channels-last f32, f16 or bf16 tensors, in AVX2+FMA loops
// (Kiln's own; ops/winograd3x3.hpp puts them together with the 36 matmuls in between).
//
// F(4x4, 3x3) computes a 4x4 block of a 3x3 correlation from a 6x6 input tile with 36
// multiplications per channel pair instead of 144 (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016, interpolation points 0, +-1, +-2, infinity):
//   Y = A^T [ (G g G^T) . (B^T d B) ] A      (. the element-wise product of two 6x6 tiles)
// With the channel sums taken inside the element-wise product, each of the 36 tile points becomes
// one matmul over channels: M[p] = V[p] * U[p], V[p] = [tiles x C] from the input tiles,
// U[p] = [C x K] from the filters. The gradient of that bilinear form is the same algorithm's
// adjoint: dM = A dY A^T per output tile, dU[p] = V[p]^T * dM[p], dg = G^T dU G.
//
// Every loop runs over 8 channels at a time, the innermost dimension of the channels-last tensors
// and of the [36][rows][channels] matrices here, so each transform is a few vector adds and FMAs
// per point; channel counts must be multiples of 8 (winograd3x3.hpp checks). The functions spread
// their tiles or filters over the calling OpenMP team; only the per-tile bodies carry the AVX2
// target attribute, so this file builds for any -march and runs only where AVX2, FMA and F16C
// were found at run time.
#pragma once

#include <cstdint>

namespace kiln::cpu::winograd {

inline constexpr int kInputTile = 6;    // alpha = m + r - 1
inline constexpr int kOutputTile = 4;   // m
inline constexpr int kPoints = kInputTile * kInputTile;

/// The 4x4 output tiles covering one convolution's output, and the input rows and columns each
/// one reads: tile (n, ty, tx) computes output rows 4ty..4ty+3 and columns 4tx..4tx+3 from input
/// rows 4ty-pad..4ty-pad+5 and the same columns; reads outside the input are zeros, writes outside
/// the output are dropped. Tiles are numbered (n * tiles_h + ty) * tiles_w + tx.
struct TileGrid {
  std::int64_t n, in_h, in_w, out_h, out_w, pad;

  std::int64_t tiles_h() const { return (out_h + kOutputTile - 1) / kOutputTile; }
  std::int64_t tiles_w() const { return (out_w + kOutputTile - 1) / kOutputTile; }
  std::int64_t tiles() const { return n * tiles_h() * tiles_w(); }
};

// The activation passes read and write the tensors as stored, so f16 and bf16 plans need no
// conversion pass: f32 (float); f16 (std::uint16_t bits) and bf16 (Bf16), widened on load and
// rounded to nearest even on store; and F32AsBf16, an f32 input of a bf16 plan, read rounded to
// bf16 as a bf16 primitive would read it.

/// The bits of a bf16 value (a type of its own: std::uint16_t here means f16).
struct Bf16 {
  std::uint16_t bits;
};
/// An f32 value read rounded to bf16 precision (only loaded, never stored).
struct F32AsBf16 {
  float value;
};

/// v[p][t][0..c) = (B^T d B)[p] of every input tile t of x [n][in_h][in_w][c].
template <class T>
void input_tiles(const T* x, std::int64_t c, const TileGrid& grid, float* v);

/// y [n][out_h][out_w][k] = A^T m A of every tile of m [36][t][0..k).
template <class T>
void output_tiles(const float* m, std::int64_t k, const TileGrid& grid, T* y);

/// dm[p][t][0..k) = (A dy A^T)[p] of every output tile t of dy [n][out_h][out_w][k] (the adjoint
/// of output_tiles: points outside the output count as zero).
template <class T>
void output_tiles_adjoint(const T* dy, std::int64_t k, const TileGrid& grid, float* dm);

/// u[p][c][k] = (G g G^T)[p] for every filter g = w[k][c][3][3] (OIHW): the forward filters.
void forward_filters(const float* w, std::int64_t k, std::int64_t c, float* u);

/// u[p][k][c] = (G g' G^T)[p] for g' = w[k][c] rotated by 180 degrees: the filters of the
/// backward-data pass, a stride-1 correlation of dy (k channels in) producing dx (c channels out).
void backward_data_filters(const float* w, std::int64_t k, std::int64_t c, float* u);

/// dw[k][c][3][3] = (or +=, `accumulate`) G^T du[.][c][k] G: the filter gradients from the 36
/// points' gradients du [36][c][k].
void filter_gradients(const float* du, std::int64_t k, std::int64_t c, float* dw, bool accumulate);

}  // namespace kiln::cpu::winograd
