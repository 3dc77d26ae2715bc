// Kiln's AVX2 kernel for the product of two tall matrices over the rows they share:
//
//   out[k][c] (+)= sum over m of a[m][k] * b[m][c]      (out = a^T b; a [M][K], b [M][C], all row-major)
//
// which is a pointwise convolution's backward-filter on channels-last tensors (dW = dY^T X with
// M = N*H*W pixels; conv_filter_avx2.hpp uses it for every convolution it fits). oneDNN 2.6 has no fast AVX2 kernel for it: its 1x1
// backward-weights convolution ran at 115-150 GFLOP/s on ResNet-50's layers on the Zen 2 EPYC
// (2 threads) and its matmul with the transposed operand was 10% slower still, while its forward
// convolutions ran at ~200. Here both operands are read the way they are stored: each row m gives
// one rank-1 update, so a 6x16 block of `out` is 12 AVX2 registers updated by 6 broadcasts of
// a[m][k..k+5] times 2 vectors of b[m][c..c+15] (the microkernel, ~100 GFLOP/s per core from L1).
// Around it the usual GEMM blocking: 256 rows of both operands at a time are copied into
// contiguous 16-column panels of b and 6-column strips of a (the strips of one 144-column chunk fit
// in L2, a panel in L1), and the rows of the next block are prefetched while this one computes.
//
// Threads split the M rows where there are many (each thread sums its rows into its own partial
// `out`, added at the end), else the K columns of a (all threads share the packed b). Where M is
// large and K > C (dY wider than X), the roles swap: out^T = b^T a is computed and added
// transposed, because copying the narrower matrix into 6-column strips is what costs (24-byte
// copies), and with the roles swapped it is the narrower one.
//
// a and b may hold bf16 or f16 values, widened to f32 as they are packed (no separate pass). b may
// also be the implicit im2col of a convolution's input (PatchRows: gathered as it is packed), so
// the same kernel computes strided and wider convolutions' backward-filters (in OHWI order).
//
// Sums run in another order than oneDNN's: results differ by f32 rounding (a few 1e-7 of the
// largest value; tests/ops/test_gemm_tn_avx2.cpp checks against a double-precision reference).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

/// Whether this CPU runs the kernel (AVX2, FMA, and F16C for f16 operands).
bool cpu_runs_gemm_tn_avx2();

/// What a and b hold: f32, or bf16 or f16 values, widened to f32 (exactly) as they are packed, so
/// f16 plans and bf16 plans without bf16 kernels compute what their widened convolution does.
enum class GemmInput : std::uint8_t { f32, bf16, f16 };

/// Whether the kernel takes these widths: K and C multiples of 16 (the panel width; either operand
/// may become the panels).
bool gemm_tn_fits(std::int64_t k, std::int64_t c);

/// b as the rows of an implicit im2col, for a convolution's backward-filter: row m is output
/// pixel (n, p, q) (m = (n * out_h + p) * out_w + q); its r * s * c columns are the taps of that
/// pixel's window in row-major (kh, kw) order, each the c channels of input pixel
/// (n, p * stride_h - pad_h + kh, q * stride_w - pad_w + kw) of the channels-last x, or zeros
/// where that lies outside the image. So out[K][r * s * c] is dW in OHWI order.
struct PatchRows {
  const void* x;
  GemmInput type;
  std::int64_t n, h, w, c;
  std::int64_t out_h, out_w, r, s;
  std::int64_t stride_h, stride_w, pad_h, pad_w;
};

/// Bytes of scratch gemm_tn_avx2 needs for this shape with `threads` OpenMP threads.
std::size_t gemm_tn_scratch_bytes(std::int64_t m, std::int64_t k, std::int64_t c, int threads);

/// out[K][C] = a^T b (accumulate: out += a^T b) with a [M][K], b [M][C] of the given element
/// types, out f32, on `threads` OpenMP threads; `scratch` holds gemm_tn_scratch_bytes(m, k, c,
/// threads) bytes, 64-byte aligned. Needs cpu_runs_gemm_tn_avx2() and gemm_tn_fits(k, c); M may be
/// anything from 1.
void gemm_tn_avx2(std::int64_t m, std::int64_t k, std::int64_t c, const void* a, GemmInput a_type, const void* b,
                  GemmInput b_type, float* out, bool accumulate, void* scratch, int threads);

/// The same with b the patch rows of `patches` (M = n * out_h * out_w rows, C = r * s * c
/// columns; gemm_tn_fits(k, patches.c) and the scratch of gemm_tn_scratch_bytes(m, k, C, threads)).
void gemm_tn_avx2_patches(std::int64_t k, const void* a, GemmInput a_type, const PatchRows& patches, float* out,
                          bool accumulate, void* scratch, int threads);

}  // namespace kiln::cpu
