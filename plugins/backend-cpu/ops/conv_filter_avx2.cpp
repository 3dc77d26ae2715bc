// A convolution's backward-filter by Kiln's AVX2 kernel (see conv_filter_avx2.hpp).
#include "ops/conv_filter_avx2.hpp"

#include <omp.h>

#include <utility>

#include "ops/conv1x1_matmul.hpp"
#include "ops/gemm_tn_avx2.hpp"

namespace kiln::cpu {
namespace {

GemmInput gemm_input(DType t) {
  return t == DType::f16 ? GemmInput::f16 : t == DType::bf16 ? GemmInput::bf16 : GemmInput::f32;
}

}  // namespace

bool ConvFilterAvx2::fits(const Conv2dDesc& d) {
  return d.groups == 1 && d.dilation_h == 1 && d.dilation_w == 1 && gemm_tn_fits(d.k, d.c);
}

bool ConvFilterAvx2::pays(const Conv2dDesc& d) {
  // Every ResNet-50 shape it fits was faster through the plugin (bench/conv_filter_avx2, Zen 2, 2
  // threads, batch 8): 1.02-1.68x, but 64 -> 64 at 56x56 at 0.97 (within the repetitions'
  // spread); the strided 3x3s gained most (1.47-1.68x). No shape measured slower by more.
  return fits(d);
}

ConvFilterAvx2::ConvFilterAvx2(const Conv2dDesc& d, std::shared_ptr<EdgeScratch> scratch)
    : desc_(d), scratch_(std::move(scratch)) {}

bool ConvFilterAvx2::takes(const Tensor& dw, const Tensor& dy, const Tensor& x) const {
  const DType in = desc_.dtype;
  const bool dtypes = (in == DType::f32 || in == DType::f16 || in == DType::bf16) && x.dtype() == in &&
                      dy.dtype() == in && dw.dtype() == DType::f32;
  return dtypes && x.layout() == Layout::nhwc && dy.layout() == Layout::nhwc && dw.layout() != Layout::opaque &&
         dw.layout() != Layout::nhwc;
}

void ConvFilterAvx2::run(const Tensor& dw, const Tensor& dy, const Tensor& x, Accumulate acc) {
  const Conv2dDesc& d = desc_;
  const int threads = omp_get_max_threads();
  const GemmInput in = gemm_input(d.dtype);
  const bool accumulate = acc == Accumulate::yes;
  float* const out = static_cast<float*>(dw.data());
  const std::int64_t taps = d.r * d.s, columns = taps * d.c;
  const std::int64_t m = d.n * d.out_h() * d.out_w();
  void* packing = scratch_->get(kScratchSlot, gemm_tn_scratch_bytes(m, d.k, columns, threads));
  if (is_pointwise(d)) {  // dY [M][K] and X [M][C] are the kernel's a and b as they are
    gemm_tn_avx2(m, d.k, d.c, dy.data(), in, x.data(), in, out, accumulate, packing, threads);
    return;
  }
  const PatchRows patches{x.data(), in,        d.n,        d.h,        d.w,        d.c,       d.out_h(),
                          d.out_w(), d.r,      d.s,        d.stride_h, d.stride_w, d.pad_h,   d.pad_w};
  if (taps == 1) {  // a strided 1x1: OHWI is OIHW
    gemm_tn_avx2_patches(d.k, dy.data(), in, patches, out, accumulate, packing, threads);
    return;
  }
  // dW[k][tap][c] into scratch, then dw[k][c][tap] (+)= it: row k of the OHWI result (taps * C
  // floats, L1/L2-resident) read across, dw's row written in order.
  auto* ohwi = static_cast<float*>(scratch_->get(kScratchSlot + 1, static_cast<std::size_t>(d.k * columns) * sizeof(float)));
  gemm_tn_avx2_patches(d.k, dy.data(), in, patches, ohwi, false, packing, threads);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t k = 0; k < d.k; ++k) {
    const float* src = ohwi + k * columns;
    float* dst = out + k * columns;
    for (std::int64_t c = 0; c < d.c; ++c) {
      for (std::int64_t t = 0; t < taps; ++t) {
        const float v = src[t * d.c + c];
        dst[c * taps + t] = accumulate ? dst[c * taps + t] + v : v;
      }
    }
  }
}

}  // namespace kiln::cpu
