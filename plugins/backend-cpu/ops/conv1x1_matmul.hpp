// A pointwise convolution (1x1 kernel, stride 1, no padding, no dilation, one group) on
// channels-last activations, computed as oneDNN matmuls over M = N*H*W rows:
//   forward           Y[M,K]  = X[M,C] * W^T           (W: the OIHW weights, [K,C] row-major)
//   backward-data     dX[M,C] = dY[M,K] * W
//   backward-filter   dW[K,C] (+)= dY^T[K,M] * X[M,C]
// Every operand is the caller's plain tensor described by strides (W^T and dY^T are transposed
// views), so unlike the convolution primitive there is no weight pull into a blocked layout before
// forward and backward-data and no blocked -> OIHW push after backward-filter; Accumulate::yes is
// the matmul's sum post-op. Measured on ResNet-50's 32 such layers at batch 8 on AVX-512
// (bench/conv1x1_matmul, docs/benchmarks.md): in f32 3-8% less time than convolution + the
// backend's edge loops, 4-7% in training; in bf16 about even in isolation but 11-16% slower in
// training (oneDNN 2.6's bf16 matmuls on cold data), so the backend's `conv1x1 = "auto"` uses it
// for f32 plans only (cpu_backend.cpp). Dtypes follow ConvPlan's rules (conv2d.cpp): the matmuls
// compute in compute_dtype (f16, and bf16 without bf16 primitives: f32), edges (dnnl_edge.hpp)
// widen or narrow operands stored in another dtype and round an f32 input of a bf16 plan computed
// in f32 to bf16 precision.
#pragma once

#include <memory>
#include <optional>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"
#include "ops/dnnl_edge.hpp"

namespace kiln::cpu {

/// Whether `d` is a pointwise convolution (a matmul over the channels of every pixel).
bool is_pointwise(const Conv2dDesc& d);

/// Whether `d` is a 1x1 convolution of stride 2 or more (no padding, one group) whose input sides
/// are exactly stride x its output's: ResNet's projection shortcuts.
bool is_strided_pointwise(const Conv2dDesc& d);

/// The backward-data of a strided pointwise convolution on channels-last f32 tensors: dx is zero
/// but at the input pixels the kernel reads, (stride * p, stride * q), where it is dY[n, p, q] * W.
/// One dense oneDNN matmul over the output pixels into scratch, then one pass over dx that copies
/// those rows in and zeroes the rest. oneDNN 2.6's AVX2 backward-data convolution ran ResNet-50's
/// 1024 -> 2048 projection (7x7 output) at ~95 GFLOP/s on the Zen 2, its matmuls at ~175
/// (docs/benchmarks.md, "Kiln's AVX2 direct convolution"). (A batched matmul writing dx through
/// its strides instead ran 2.3x slower than the convolution.)
class StridedPointwiseBackwardData {
 public:
  /// `d` must be strided pointwise (is_strided_pointwise) with f32 plans.
  StridedPointwiseBackwardData(const Conv2dDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch);

  /// Whether these operands can take it: all f32, activations channels-last, w plain.
  static bool takes(const Tensor& dx, const Tensor& dy, const Tensor& w);
  void run(dnnl::stream& stream, const Tensor& dx, const Tensor& dy, const Tensor& w);

  /// EdgeScratch slot of the dense product (after the direct convolution's 46-49).
  static constexpr int kScratchSlot = 50;

 private:
  Conv2dDesc desc_;
  dnnl::engine engine_;
  std::shared_ptr<EdgeScratch> scratch_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul matmul_;
};

class Conv1x1Matmul {
 public:
  /// `d` must be pointwise (is_pointwise); the matmuls are built on first use of each direction.
  Conv1x1Matmul(const Conv2dDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch,
                bool bf16_primitives);

  /// Whether these operands can take this path: activations channels-last (NCHW ones, which
  /// tests use, are no plain matmul operand), weights plain (OIHW; for a 1x1 kernel the same bytes
  /// as OHWI).
  static bool takes(const Tensor& activation_a, const Tensor& activation_b, const Tensor& weights);

  void forward(dnnl::stream& stream, const Tensor& y, const Tensor& x, const Tensor& w);
  void backward_data(dnnl::stream& stream, const Tensor& dx, const Tensor& dy, const Tensor& w);
  void backward_filter(dnnl::stream& stream, const Tensor& dw, const Tensor& dy, const Tensor& x, Accumulate acc);

 private:
  /// One matmul with its edges (with_sum: the same with a sum post-op, where the output edge is
  /// direct), built for the dtypes of the tensors it was first called with.
  struct Stage : EdgedPrimitive {
    DType in0, in1, out;
  };
  /// Builds (or reuses) a stage computing out[rows(out)] = a * b from these 2-D views.
  Stage& stage(std::optional<Stage>& slot, const Tensor& a, const dnnl::memory::dims& a_shape,
               const dnnl::memory::dims& a_strides, const Tensor& b, const dnnl::memory::dims& b_shape,
               const dnnl::memory::dims& b_strides, const Tensor& out, bool accumulates);
  EdgeRound round(DType operand) const;

  Conv2dDesc desc_;
  DType compute_;
  bool bf16_primitives_;
  dnnl::engine engine_;
  std::shared_ptr<EdgeScratch> scratch_;
  std::int64_t m_, c_, k_;
  std::optional<Stage> fwd_, bwd_data_, bwd_filter_;
};

}  // namespace kiln::cpu
