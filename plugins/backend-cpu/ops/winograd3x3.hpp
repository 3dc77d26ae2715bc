// Kiln's own Winograd F(4x4, 3x3) convolution for CPUs with AVX2, FMA and F16C, on channels-last
// f32, f16 or bf16 tensors, in all three directions. oneDNN 2.6 has Winograd kernels only from AVX-512
// up; on an AVX2 CPU its direct convolutions are all there is, and they are no faster than
// PyTorch's (the reason the AVX2 EPYCs missed issue 13's fp32 ResNet-50 goal). Per direction,
// three passes (U and dU: [36][in channels][out channels]; V, M, dM: [36][tiles][channels]):
//
//   forward          V = input tiles of x    U = G w G^T             M[p] = V[p] U[p]      y = output tiles of M
//   backward-data    V = input tiles of dy   U = G rot180(w)^T G^T   M[p] = V[p] U[p]      dx = output tiles of M
//   backward-filter  V = input tiles of x    dM = A dy A^T per tile  dU[p] = V[p]^T dM[p]  dw (+)= G^T dU G
//
// The tile and filter transforms are Kiln's AVX2 loops (winograd_transforms.hpp); the 36 matmuls
// of a pass are one batched oneDNN matmul over the plain matrices. Backward-data is a stride-1
// correlation of dy with the rotated, transposed filters and padding 2 - pad, so it is the
// forward algorithm with other filters (correlate()). The intermediate matrices live in the
// backend's shared scratch (EdgeScratch slots kScratchSlot..+3), used only during one call.
//
// Takes: 3x3 kernel, stride 1, no dilation, one group, padding 0 to 2, channel counts multiples
// of 8 (the transforms' vector width); operands f32, f16 or bf16 (f16 plans, and bf16 ones on
// these CPUs without bf16 kernels, compute in f32 as on every other path of this backend; an f32
// input of a bf16 plan is read rounded to bf16), activations channels-last, weights plain OIHW.
// The results differ from a direct convolution's by the transforms' f32 rounding, a few 1e-6 of
// the largest output, before any f16 or bf16 output's own rounding
// (tests/ops/test_conv3x3_kiln_winograd.cpp). Measured on the Zen 2 EPYC: ResNet-50's 13 stride-1
// 3x3 layers 1.62x faster than oneDNN's direct AVX2 convolutions (docs/benchmarks.md, "Kiln's
// Winograd for AVX2 CPUs"); conv2d.cpp's kiln_winograd_pays says where it pays.
#pragma once

#include <memory>
#include <optional>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"
#include "ops/dnnl_edge.hpp"
#include "ops/winograd_transforms.hpp"

namespace kiln::cpu {

/// Whether this CPU runs Kiln's Winograd kernels (AVX2, FMA and F16C).
bool cpu_runs_kiln_winograd();

class Winograd3x3 {
 public:
  /// Whether `d` is a convolution this algorithm computes (the shape rules above; not whether it pays).
  static bool fits(const Conv2dDesc& d);
  /// Whether these operands can take it: f32, f16 or bf16 (widened on load, rounded on store: the
  /// plans of f16 and bf16 compute in f32 like every other path here on AVX2), activations
  /// channels-last, weights plain.
  static bool takes(const Tensor& activation_a, const Tensor& activation_b, const Tensor& weights);

  /// `d` must fit; the matmuls are built on first use of each direction.
  Winograd3x3(const Conv2dDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch);

  void forward(dnnl::stream& stream, const Tensor& y, const Tensor& x, const Tensor& w);
  void backward_data(dnnl::stream& stream, const Tensor& dx, const Tensor& dy, const Tensor& w);
  void backward_filter(dnnl::stream& stream, const Tensor& dw, const Tensor& dy, const Tensor& x, Accumulate acc);

  /// EdgeScratch slots used: this one and the next three (above the edges' own).
  static constexpr int kScratchSlot = 40;

 private:
  /// One batched matmul out[36][m][n] = a[36][m][kk] * b[36][kk][n], a read transposed when
  /// `a_transposed` (stored [36][kk][m]).
  struct Matmul {
    dnnl::matmul primitive;
    dnnl::memory a, b, out;
  };
  Matmul make_matmul(std::int64_t m, std::int64_t kk, std::int64_t n, bool a_transposed) const;
  void run(dnnl::stream& stream, Matmul& mm, const float* a, const float* b, float* out);
  float* scratch(int which, std::int64_t floats);
  /// out = the stride-1 3x3 correlation of `in` (in_channels) over `grid` with the transformed
  /// filters [36][in_channels][out_channels]: tiles in, one batched matmul, tiles out. Forward and
  /// backward-data differ only in the grid, the filters and which tensors go in and out.
  void correlate(dnnl::stream& stream, std::optional<Matmul>& slot, const winograd::TileGrid& grid,
                 std::int64_t in_channels, std::int64_t out_channels, const Tensor& in, const float* filters,
                 const Tensor& out);
  /// The weights in f32: `w` itself; f16 or bf16 weights widened, or f32 weights of a bf16 plan
  /// rounded to bf16 precision, into scratch slot 3.
  const float* f32_weights(const Tensor& w);
  /// A bf16 plan reads its f32 inputs rounded to bf16 (as the direct path's edges do).
  bool bf16_plan() const { return desc_.dtype == DType::bf16; }

  Conv2dDesc desc_;
  dnnl::engine engine_;
  std::shared_ptr<EdgeScratch> scratch_;
  winograd::TileGrid forward_grid_, backward_data_grid_;
  std::optional<Matmul> fwd_, bwd_data_, bwd_filter_;
};

}  // namespace kiln::cpu
