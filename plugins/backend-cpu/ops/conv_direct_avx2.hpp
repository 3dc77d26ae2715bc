// Kiln's AVX2 direct convolution, forward and backward-data, on channels-last f32 tensors:
//
//   forward:        y[m][k]  (+)= sum over taps t, channels c of  x(m, t)[c]  * w[k][c][t]
//   backward-data:  dx[m][c] (+)= sum over taps t, channels k of dy(m, t)[k]  * w[k][c][t]
//
// where x(m, t) is the input pixel under tap t of output pixel m's window (none in the padding).
// Both are one product of an implicit im2col matrix with the weights, computed the way
// gemm_tn_avx2.hpp computes its own: a 6 x 16 block of outputs (6 pixels, 16 channels) lives in
// 12 AVX2 registers while the microkernel walks the reduction, broadcasting one input value per
// pixel and loading 16 weights. The input is read in place: a tap of a pixel's window is C
// contiguous channels of the channels-last tensor, so each of the 6 pixels is one pointer per
// tap and nothing is gathered or copied. Only the weights are packed, per call, into 16-column
// panels [tap][channel][16].
//
// Backward-data is the same product over dx's pixels, reading dy: dx pixel i gets tap kh from dy
// row (i + pad - kh) / stride where that divides, so a strided convolution's dx pixels fall into
// parity classes (for stride 2 four, with 1, 2, 2 and 4 of a 3x3's taps). Pixels are grouped by
// the taps they have, so neither those missing taps nor the padding's are multiplied as zeros.
//
// Why: oneDNN 2.6's AVX2 direct kernels ran ResNet-50's strided 3x3s and its 7x7/512 3x3s at
// 95-140 GFLOP/s on the Zen 2 EPYC (2 threads, channels-last), against ~180 for its matmul; here
// those layers took 1.19-1.24x less time in forward and backward-data together
// (docs/benchmarks.md, "Kiln's AVX2 direct convolution").
//
// Sums run in another order than oneDNN's (differences of f32 rounding; tests/ops/test_conv_direct_avx2.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"
#include "ops/dnnl_edge.hpp"

namespace kiln::cpu {

/// Whether this CPU runs the kernel (AVX2 and FMA).
bool cpu_runs_conv_direct_avx2();

/// Whether the kernel computes `d`'s shape: one group, no dilation, C and K multiples of 16,
/// kernel sides up to 64 (the calls below take f32 tensors).
bool conv_direct_avx2_fits(const Conv2dDesc& d);

/// Bytes of scratch the calls below need for `d` with `threads` OpenMP threads (64-byte aligned).
std::size_t conv_direct_avx2_scratch_bytes(const Conv2dDesc& d, int threads);

/// y (+)= conv(x, w): x [N][H][W][C] and y [N][P][Q][K] channels-last, w [K][C][R][S] (OIHW).
void conv_direct_avx2_forward(const Conv2dDesc& d, const float* x, const float* w, float* y, bool accumulate,
                              void* scratch, int threads);

/// dx (+)= the backward-data of dy: dy [N][P][Q][K] and dx [N][H][W][C] channels-last, w OIHW.
void conv_direct_avx2_backward_data(const Conv2dDesc& d, const float* dy, const float* w, float* dx,
                                    bool accumulate, void* scratch, int threads);

/// A convolution plan's use of the kernel (conv2d.cpp, where the `conv_direct` option says so),
/// for plans that compute in f32: f32 ones, and f16 and bf16 ones without bf16 kernels, whose
/// 16-bit operands are widened (exactly) into scratch, computed in f32 and the result rounded
/// to the plan's dtype, as oneDNN's path with its edges does.
class ConvDirectAvx2 {
 public:
  /// Whether the kernel computes `d` (conv_direct_avx2_fits; the CPU is the backend's check).
  static bool fits(const Conv2dDesc& d) { return conv_direct_avx2_fits(d); }
  /// Whether it was measured faster than oneDNN's for shapes like `d` (conv_direct_avx2.cpp).
  static bool pays(const Conv2dDesc& d);

  /// `d` must fit. The panels, pointer tables and widened operands live in the backend's shared
  /// scratch.
  ConvDirectAvx2(const Conv2dDesc& d, std::shared_ptr<EdgeScratch> scratch);

  /// Whether these operands can take it: all three of the plan's dtype, the activations
  /// channels-last, w plain (OIHW).
  bool takes(const Tensor& out, const Tensor& in, const Tensor& w) const;
  /// y = conv(x, w), on the backend's OpenMP threads.
  void forward(const Tensor& y, const Tensor& x, const Tensor& w);
  /// dx = the backward-data of dy.
  void backward_data(const Tensor& dx, const Tensor& dy, const Tensor& w);

  /// EdgeScratch slots (after the backward-filter's 44-45): the kernel's scratch, then the f32
  /// copies of a 16-bit call's input, weights and output.
  static constexpr int kScratchSlot = 46;

 private:
  void run(const Tensor& out, const Tensor& in, const Tensor& w, bool forward);

  Conv2dDesc desc_;
  std::shared_ptr<EdgeScratch> scratch_;
};

}  // namespace kiln::cpu
