// oneDNN 2.x and 3.x in one place. The cpu backend builds against Debian 12's oneDNN 2.6 (what
// scripts/setup.sh installs) and against 3.x: Debian 13's 3.7, Ubuntu 24.04's 3.1, PyPI's
// onednn-devel-cpu-gomp 3.2 (docs/building.md, "oneDNN 3"). The two APIs differ where Kiln
// touches them in two ways only:
//  - 3.x builds a primitive descriptor straight from its arguments, where 2.x first builds an
//    operation descriptor (`convolution_forward::desc`) and the primitive descriptor from it;
//  - 3.x's memory descriptor is an opaque handle read through accessors, where 2.x exposes the C
//    struct (`md.data.format_desc.blocking`).
// The functions below take the 3.x argument order and build either way, and `Blocking` is what
// Kiln's layout loops read of a descriptor. Everything else (memory, reorder, post-ops' sum,
// streams, engines, format tags) is the same API in both.
#pragma once

#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::cpu::onednn {

using dims = dnnl::memory::dims;

inline dnnl::memory::data_type data_type(const dnnl::memory::desc& md) {
#if DNNL_VERSION_MAJOR >= 3
  return md.get_data_type();
#else
  return md.data_type();
#endif
}

/// A descriptor's layout as oneDNN's blocked format describes it (2.x's dnnl_blocking_desc_t and
/// the fields around it): element (x_0..x_{n-1}) lies at offset0 + sum_d (x_d / B_d) * strides[d]
/// + its offset inside the innermost tile, B_d being the product of dim d's inner blocks.
struct Blocking {
  dnnl::memory::data_type data_type = dnnl::memory::data_type::undef;
  int ndims = 0;
  std::int64_t dims[DNNL_MAX_NDIMS]{};
  std::int64_t padded_dims[DNNL_MAX_NDIMS]{};
  std::int64_t offset0 = 0;
  /// Format kind "blocked": plain strided layouts and oneDNN's own blocked ones (not "any").
  bool blocked = false;
  std::int64_t strides[DNNL_MAX_NDIMS]{};
  int inner_nblks = 0;
  std::int64_t inner_blks[DNNL_MAX_NDIMS]{};
  std::int64_t inner_idxs[DNNL_MAX_NDIMS]{};
  /// Extra data after the elements (2.x: `extra.flags`, set only for int8 weights' compensation).
  /// 3.x has no query for it; the loops that read Blocking take f32 and bf16 only, where oneDNN
  /// never adds it, so there it is false.
  bool extra = false;
};

Blocking blocking(const dnnl::memory::desc& md);

/// Whether batch normalisation's backward takes DNNL_ARG_SHIFT (with use_shift): 2.6 refuses to
/// execute without it, although the gradient does not depend on it; 3.x refuses to execute with it.
inline constexpr bool kBatchNormBackwardTakesShift = DNNL_VERSION_MAJOR < 3;

// Primitive descriptors, 3.x's argument order. `hint` is the forward-training descriptor that a
// backward one needs; an empty `attr` is the default attributes.

dnnl::convolution_forward::primitive_desc convolution_forward(
    const dnnl::engine& engine, dnnl::prop_kind prop, dnnl::algorithm algorithm, const dnnl::memory::desc& src,
    const dnnl::memory::desc& weights, const dnnl::memory::desc& dst, const dims& strides, const dims& dilates,
    const dims& pad_l, const dims& pad_r);

dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const dnnl::memory::desc& diff_src,
    const dnnl::memory::desc& weights, const dnnl::memory::desc& diff_dst, const dims& strides, const dims& dilates,
    const dims& pad_l, const dims& pad_r, const dnnl::convolution_forward::primitive_desc& hint);

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const dnnl::memory::desc& src,
    const dnnl::memory::desc& diff_weights, const dnnl::memory::desc& diff_dst, const dims& strides,
    const dims& dilates, const dims& pad_l, const dims& pad_r, const dnnl::convolution_forward::primitive_desc& hint);

/// matmul without a bias argument (`bias` a zero descriptor) or with one.
dnnl::matmul::primitive_desc matmul(const dnnl::engine& engine, const dnnl::memory::desc& src,
                                    const dnnl::memory::desc& weights, const dnnl::memory::desc& bias,
                                    const dnnl::memory::desc& dst, const dnnl::primitive_attr& attr = {});

/// dst = alpha * (the primitive's result), before any post-op: 2.x's output scale; in 3.x (whose
/// scales are per-argument runtime values) a linear eltwise post-op, which the caller must add
/// first, before its other post-ops (`ops` is that chain, empty so far).
void scale_output(dnnl::primitive_attr& attr, dnnl::post_ops& ops, float alpha);

/// Batch normalisation on `data` (same descriptor for source and destination, and for their
/// gradients).
dnnl::batch_normalization_forward::primitive_desc batch_normalization_forward(
    const dnnl::engine& engine, dnnl::prop_kind prop, const dnnl::memory::desc& data, float epsilon,
    dnnl::normalization_flags flags);

dnnl::batch_normalization_backward::primitive_desc batch_normalization_backward(
    const dnnl::engine& engine, const dnnl::memory::desc& data, float epsilon, dnnl::normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint);

/// Pooling without dilation.
dnnl::pooling_forward::primitive_desc pooling_forward(const dnnl::engine& engine, dnnl::prop_kind prop,
                                                      dnnl::algorithm algorithm, const dnnl::memory::desc& src,
                                                      const dnnl::memory::desc& dst, const dims& strides,
                                                      const dims& kernel, const dims& pad_l, const dims& pad_r);

dnnl::pooling_backward::primitive_desc pooling_backward(const dnnl::engine& engine, dnnl::algorithm algorithm,
                                                        const dnnl::memory::desc& diff_src,
                                                        const dnnl::memory::desc& diff_dst, const dims& strides,
                                                        const dims& kernel, const dims& pad_l, const dims& pad_r,
                                                        const dnnl::pooling_forward::primitive_desc& hint);

}  // namespace kiln::cpu::onednn
