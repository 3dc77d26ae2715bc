// oneDNN 2.x and 3.x (see onednn_compat.hpp): each function has one body per major version.
#include "ops/onednn_compat.hpp"

#include <algorithm>

namespace kiln::cpu::onednn {

#if DNNL_VERSION_MAJOR >= 3
namespace {

void copy_dims(const dims& from, std::int64_t* to) { std::copy(from.begin(), from.end(), to); }

}  // namespace
#endif

Blocking blocking(const dnnl::memory::desc& md) {
  Blocking b;
#if DNNL_VERSION_MAJOR >= 3
  b.data_type = md.get_data_type();
  b.ndims = md.get_ndims();
  copy_dims(md.get_dims(), b.dims);
  copy_dims(md.get_padded_dims(), b.padded_dims);
  b.offset0 = md.get_submemory_offset();
  b.blocked = md.get_format_kind() == dnnl::memory::format_kind::blocked;
  if (b.blocked) {
    copy_dims(md.get_strides(), b.strides);
    b.inner_nblks = md.get_inner_nblks();
    copy_dims(md.get_inner_blks(), b.inner_blks);
    copy_dims(md.get_inner_idxs(), b.inner_idxs);
  }
#else
  const dnnl_memory_desc_t& c = md.data;
  b.data_type = static_cast<dnnl::memory::data_type>(c.data_type);
  b.ndims = c.ndims;
  std::copy(c.dims, c.dims + c.ndims, b.dims);
  std::copy(c.padded_dims, c.padded_dims + c.ndims, b.padded_dims);
  b.offset0 = c.offset0;
  b.blocked = c.format_kind == dnnl_blocked;
  if (b.blocked) {
    const dnnl_blocking_desc_t& blk = c.format_desc.blocking;
    std::copy(blk.strides, blk.strides + c.ndims, b.strides);
    b.inner_nblks = blk.inner_nblks;
    std::copy(blk.inner_blks, blk.inner_blks + blk.inner_nblks, b.inner_blks);
    std::copy(blk.inner_idxs, blk.inner_idxs + blk.inner_nblks, b.inner_idxs);
  }
  b.extra = c.extra.flags != 0;
#endif
  return b;
}

#if DNNL_VERSION_MAJOR >= 3

dnnl::convolution_forward::primitive_desc convolution_forward(
    const dnnl::engine& engine, dnnl::prop_kind prop, dnnl::algorithm algorithm, const dnnl::memory::desc& src,
    const dnnl::memory::desc& weights, const dnnl::memory::desc& dst, const dims& strides, const dims& dilates,
    const dims& pad_l, const dims& pad_r) {
  return {engine, prop, algorithm, src, weights, dst, strides, dilates, pad_l, pad_r};
}

dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const dnnl::memory::desc& diff_src,
    const dnnl::memory::desc& weights, const dnnl::memory::desc& diff_dst, const dims& strides, const dims& dilates,
    const dims& pad_l, const dims& pad_r, const dnnl::convolution_forward::primitive_desc& hint) {
  return {engine, algorithm, diff_src, weights, diff_dst, strides, dilates, pad_l, pad_r, hint};
}

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const dnnl::memory::desc& src,
    const dnnl::memory::desc& diff_weights, const dnnl::memory::desc& diff_dst, const dims& strides,
    const dims& dilates, const dims& pad_l, const dims& pad_r, const dnnl::convolution_forward::primitive_desc& hint) {
  return {engine, algorithm, src, diff_weights, diff_dst, strides, dilates, pad_l, pad_r, hint};
}

dnnl::matmul::primitive_desc matmul(const dnnl::engine& engine, const dnnl::memory::desc& src,
                                    const dnnl::memory::desc& weights, const dnnl::memory::desc& bias,
                                    const dnnl::memory::desc& dst, const dnnl::primitive_attr& attr) {
  if (bias.is_zero()) return {engine, src, weights, dst, attr};
  return {engine, src, weights, bias, dst, attr};
}

void scale_output(dnnl::primitive_attr&, dnnl::post_ops& ops, float alpha) {
  ops.append_eltwise(dnnl::algorithm::eltwise_linear, alpha, 0.0f);
}

dnnl::batch_normalization_forward::primitive_desc batch_normalization_forward(
    const dnnl::engine& engine, dnnl::prop_kind prop, const dnnl::memory::desc& data, float epsilon,
    dnnl::normalization_flags flags) {
  return {engine, prop, data, data, epsilon, flags};
}

dnnl::batch_normalization_backward::primitive_desc batch_normalization_backward(
    const dnnl::engine& engine, const dnnl::memory::desc& data, float epsilon, dnnl::normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint) {
  return {engine, dnnl::prop_kind::backward, data, data, data, epsilon, flags, hint};
}

dnnl::pooling_forward::primitive_desc pooling_forward(const dnnl::engine& engine, dnnl::prop_kind prop,
                                                      dnnl::algorithm algorithm, const dnnl::memory::desc& src,
                                                      const dnnl::memory::desc& dst, const dims& strides,
                                                      const dims& kernel, const dims& pad_l, const dims& pad_r) {
  const dims no_dilation(strides.size(), 0);
  return {engine, prop, algorithm, src, dst, strides, kernel, no_dilation, pad_l, pad_r};
}

dnnl::pooling_backward::primitive_desc pooling_backward(const dnnl::engine& engine, dnnl::algorithm algorithm,
                                                        const dnnl::memory::desc& diff_src,
                                                        const dnnl::memory::desc& diff_dst, const dims& strides,
                                                        const dims& kernel, const dims& pad_l, const dims& pad_r,
                                                        const dnnl::pooling_forward::primitive_desc& hint) {
  const dims no_dilation(strides.size(), 0);
  return {engine, algorithm, diff_src, diff_dst, strides, kernel, no_dilation, pad_l, pad_r, hint};
}

#else

dnnl::convolution_forward::primitive_desc convolution_forward(
    const dnnl::engine& engine, dnnl::prop_kind prop, dnnl::algorithm algorithm, const dnnl::memory::desc& src,
    const dnnl::memory::desc& weights, const dnnl::memory::desc& dst, const dims& strides, const dims& dilates,
    const dims& pad_l, const dims& pad_r) {
  return {{prop, algorithm, src, weights, dst, strides, dilates, pad_l, pad_r}, engine};
}

dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const dnnl::memory::desc& diff_src,
    const dnnl::memory::desc& weights, const dnnl::memory::desc& diff_dst, const dims& strides, const dims& dilates,
    const dims& pad_l, const dims& pad_r, const dnnl::convolution_forward::primitive_desc& hint) {
  return {{algorithm, diff_src, weights, diff_dst, strides, dilates, pad_l, pad_r}, engine, hint};
}

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& engine, dnnl::algorithm algorithm, const dnnl::memory::desc& src,
    const dnnl::memory::desc& diff_weights, const dnnl::memory::desc& diff_dst, const dims& strides,
    const dims& dilates, const dims& pad_l, const dims& pad_r, const dnnl::convolution_forward::primitive_desc& hint) {
  return {{algorithm, src, diff_weights, diff_dst, strides, dilates, pad_l, pad_r}, engine, hint};
}

dnnl::matmul::primitive_desc matmul(const dnnl::engine& engine, const dnnl::memory::desc& src,
                                    const dnnl::memory::desc& weights, const dnnl::memory::desc& bias,
                                    const dnnl::memory::desc& dst, const dnnl::primitive_attr& attr) {
  if (bias.is_zero()) return {dnnl::matmul::desc(src, weights, dst), attr, engine};
  return {dnnl::matmul::desc(src, weights, bias, dst), attr, engine};
}

void scale_output(dnnl::primitive_attr& attr, dnnl::post_ops&, float alpha) { attr.set_output_scales(0, {alpha}); }

dnnl::batch_normalization_forward::primitive_desc batch_normalization_forward(
    const dnnl::engine& engine, dnnl::prop_kind prop, const dnnl::memory::desc& data, float epsilon,
    dnnl::normalization_flags flags) {
  return {{prop, data, epsilon, flags}, engine};
}

dnnl::batch_normalization_backward::primitive_desc batch_normalization_backward(
    const dnnl::engine& engine, const dnnl::memory::desc& data, float epsilon, dnnl::normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint) {
  return {{dnnl::prop_kind::backward, data, data, epsilon, flags}, engine, hint};
}

dnnl::pooling_forward::primitive_desc pooling_forward(const dnnl::engine& engine, dnnl::prop_kind prop,
                                                      dnnl::algorithm algorithm, const dnnl::memory::desc& src,
                                                      const dnnl::memory::desc& dst, const dims& strides,
                                                      const dims& kernel, const dims& pad_l, const dims& pad_r) {
  return {{prop, algorithm, src, dst, strides, kernel, pad_l, pad_r}, engine};
}

dnnl::pooling_backward::primitive_desc pooling_backward(const dnnl::engine& engine, dnnl::algorithm algorithm,
                                                        const dnnl::memory::desc& diff_src,
                                                        const dnnl::memory::desc& diff_dst, const dims& strides,
                                                        const dims& kernel, const dims& pad_l, const dims& pad_r,
                                                        const dnnl::pooling_forward::primitive_desc& hint) {
  return {{algorithm, diff_src, diff_dst, strides, kernel, pad_l, pad_r}, engine, hint};
}

#endif

}  // namespace kiln::cpu::onednn
