// A convolution's backward-filter by Kiln's AVX2 kernel (gemm_tn_avx2.hpp), on channels-last
// tensors: dW = dY^T * patches(X), one rank-1 update per output pixel. For a pointwise
// convolution (1x1, stride 1, no padding) the patches are X's own rows and dW is written in
// place; otherwise the kernel gathers each output pixel's window from X as it packs it (no
// im2col buffer), and dW comes out in OHWI order, added into the caller's OIHW dW by one pass
// (a 1x1 kernel of any stride writes in place: OHWI and OIHW are the same bytes there).
//
// Why: oneDNN 2.6's AVX2 backward-weights convolutions ran ResNet-50's layers at 100-150 GFLOP/s
// on the Zen 2 EPYC (2 threads) against its forward's ~200; Kiln's kernel runs the same at 150-180
// (docs/benchmarks.md, "Convolution backward-filter by Kiln's AVX2 kernel"). pays() holds where
// it was measured faster.
//
// Takes plans that compute in f32: f32 ones, f16 ones, and bf16 ones without bf16 kernels; x and
// dy of the plan's dtype (16-bit values widened exactly as they are packed), dw f32 (the master
// gradients of mixed precision); activations channels-last, dw plain OIHW; one group, no
// dilation, C and K multiples of 16. Sums run in another order than oneDNN's (differences of
// f32 rounding; tests/ops/test_conv_filter_avx2.cpp).
#pragma once

#include <memory>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"
#include "ops/dnnl_edge.hpp"

namespace kiln::cpu {

class ConvFilterAvx2 {
 public:
  /// Whether the kernel computes `d`'s backward-filter (the shape rules above; the CPU is the
  /// backend's check).
  static bool fits(const Conv2dDesc& d);
  /// Whether it was measured faster than oneDNN's for shapes like `d` (conv_filter_avx2.cpp).
  static bool pays(const Conv2dDesc& d);

  /// `d` must fit. The packing space and the OHWI result live in the backend's shared scratch.
  ConvFilterAvx2(const Conv2dDesc& d, std::shared_ptr<EdgeScratch> scratch);

  /// Whether these operands can take it: x and dy of the plan's dtype (f32, f16 or bf16),
  /// channels-last; dw f32, plain.
  bool takes(const Tensor& dw, const Tensor& dy, const Tensor& x) const;
  /// dw (+)= the backward-filter of dy and x, on the backend's OpenMP threads.
  void run(const Tensor& dw, const Tensor& dy, const Tensor& x, Accumulate acc);

  /// EdgeScratch slots: the kernel's packing space, and the OHWI result (above Winograd's 40-43).
  static constexpr int kScratchSlot = 44;

 private:
  Conv2dDesc desc_;
  std::shared_ptr<EdgeScratch> scratch_;
};

}  // namespace kiln::cpu
