// Pointwise convolutions as strided matmuls (see conv1x1_matmul.hpp).
#include "ops/conv1x1_matmul.hpp"

#include <algorithm>
#include <utility>

#include "ops/onednn_compat.hpp"

namespace kiln::cpu {

using dims = dnnl::memory::dims;

bool is_pointwise(const Conv2dDesc& d) {
  return d.r == 1 && d.s == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 && d.pad_w == 0 &&
         d.dilation_h == 1 && d.dilation_w == 1 && d.groups == 1;
}

Conv1x1Matmul::Conv1x1Matmul(const Conv2dDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch,
                             bool bf16_primitives)
    : desc_(d), compute_(compute_dtype(d.dtype, bf16_primitives)), bf16_primitives_(bf16_primitives),
      engine_(engine), scratch_(std::move(scratch)), m_(d.n * d.h * d.w), c_(d.c), k_(d.k) {}

bool Conv1x1Matmul::takes(const Tensor& activation_a, const Tensor& activation_b, const Tensor& weights) {
  return activation_a.layout() == Layout::nhwc && activation_b.layout() == Layout::nhwc &&
         weights.layout() != Layout::opaque;
}

EdgeRound Conv1x1Matmul::round(DType operand) const {
  // As ConvPlan: an f32 input of a bf16 plan computed in f32 is rounded to what a bf16 kernel reads.
  const bool rounds = desc_.dtype == DType::bf16 && compute_ == DType::f32 && operand == DType::f32;
  return rounds ? EdgeRound::bf16 : EdgeRound::none;
}

Conv1x1Matmul::Stage& Conv1x1Matmul::stage(std::optional<Stage>& slot, const Tensor& a, const dims& a_shape,
                                           const dims& a_strides, const Tensor& b, const dims& b_shape,
                                           const dims& b_strides, const Tensor& out, bool accumulates) {
  if (slot && slot->in0 == a.dtype() && slot->in1 == b.dtype() && slot->out == out.dtype()) return *slot;
  const auto view = [](const dims& shape, const dims& strides, DType t) {
    return dnnl::memory::desc(shape, dnnl_dtype(t), strides);
  };
  const dims o_shape{a_shape[0], b_shape[1]}, o_strides{b_shape[1], 1};
  const DType out_compute = compute_dtype(out.dtype(), bf16_primitives_);
  const dnnl::memory::desc a_in = view(a_shape, a_strides, compute_), b_in = view(b_shape, b_strides, compute_);
  const dnnl::memory::desc o_user = view(o_shape, o_strides, out.dtype()), o_in = view(o_shape, o_strides, out_compute);
  // Accumulating straight into the caller's memory needs the same dtype there; otherwise the
  // output edge adds (widen, add, narrow), as it does for the convolution's f16 gradients.
  const bool direct_sum = accumulates && o_user == o_in;
  std::optional<dnnl::primitive> with_sum;
  if (direct_sum) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    with_sum.emplace(dnnl::matmul(onednn::matmul(engine_, a_in, b_in, {}, o_in, attr)));
  }
  const EdgeSum edge_sum = accumulates && !direct_sum ? EdgeSum::yes : EdgeSum::no;
  slot.emplace(Stage{{dnnl::matmul(onednn::matmul(engine_, a_in, b_in, {}, o_in)), std::move(with_sum),
                      Edge(engine_, view(a_shape, a_strides, a.dtype()), a_in, scratch_, 0, EdgeSum::no, round(a.dtype())),
                      Edge(engine_, view(b_shape, b_strides, b.dtype()), b_in, scratch_, 1, EdgeSum::no, round(b.dtype())),
                      Edge(engine_, o_user, o_in, scratch_, 2, edge_sum), {}},
                     a.dtype(), b.dtype(), out.dtype()});
  slot->args = {{DNNL_ARG_SRC, slot->e0.inner()}, {DNNL_ARG_WEIGHTS, slot->e1.inner()}, {DNNL_ARG_DST, slot->eo.inner()}};
  return *slot;
}

void Conv1x1Matmul::forward(dnnl::stream& stream, const Tensor& y, const Tensor& x, const Tensor& w) {
  // Y[M,K] = X[M,C] * W^T: W is [K,C] row-major, read as [C,K] with strides (1, C).
  stage(fwd_, x, {m_, c_}, {c_, 1}, w, {c_, k_}, {1, c_}, y, false)
      .run(stream, x.data(), w.data(), y.data(), Accumulate::no);
}

void Conv1x1Matmul::backward_data(dnnl::stream& stream, const Tensor& dx, const Tensor& dy, const Tensor& w) {
  // dX[M,C] = dY[M,K] * W[K,C].
  stage(bwd_data_, dy, {m_, k_}, {k_, 1}, w, {k_, c_}, {c_, 1}, dx, false)
      .run(stream, dy.data(), w.data(), dx.data(), Accumulate::no);
}

void Conv1x1Matmul::backward_filter(dnnl::stream& stream, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                    Accumulate acc) {
  // dW[K,C] (+)= dY^T[K,M] * X[M,C]: dY is [M,K] row-major, read as [K,M] with strides (1, K).
  stage(bwd_filter_, dy, {k_, m_}, {1, k_}, x, {m_, c_}, {c_, 1}, dw, true)
      .run(stream, dy.data(), x.data(), dw.data(), acc);
}

bool is_strided_pointwise(const Conv2dDesc& d) {
  return d.r == 1 && d.s == 1 && (d.stride_h > 1 || d.stride_w > 1) && d.pad_h == 0 && d.pad_w == 0 &&
         d.dilation_h == 1 && d.dilation_w == 1 && d.groups == 1 && d.h == d.stride_h * d.out_h() &&
         d.w == d.stride_w * d.out_w();
}

namespace {

/// dense[M][C] = dY[M][K] * W[K][C] over the M = n * P * Q output pixels.
dnnl::matmul::primitive_desc dense_matmul(const Conv2dDesc& d, const dnnl::engine& engine) {
  using tag_dims = dnnl::memory::dims;
  const std::int64_t m = d.n * d.out_h() * d.out_w();
  const auto f32 = dnnl::memory::data_type::f32;
  const dnnl::memory::desc src(tag_dims{m, d.k}, f32, tag_dims{d.k, 1});
  const dnnl::memory::desc wei(tag_dims{d.k, d.c}, f32, tag_dims{d.c, 1});
  const dnnl::memory::desc dst(tag_dims{m, d.c}, f32, tag_dims{d.c, 1});
  return onednn::matmul(engine, src, wei, {}, dst);
}

}  // namespace

StridedPointwiseBackwardData::StridedPointwiseBackwardData(const Conv2dDesc& d, const dnnl::engine& engine,
                                                           std::shared_ptr<EdgeScratch> scratch)
    : desc_(d), engine_(engine), scratch_(std::move(scratch)), pd_(dense_matmul(d, engine)), matmul_(pd_) {}

bool StridedPointwiseBackwardData::takes(const Tensor& dx, const Tensor& dy, const Tensor& w) {
  return dx.dtype() == DType::f32 && dy.dtype() == DType::f32 && w.dtype() == DType::f32 &&
         dx.layout() == Layout::nhwc && dy.layout() == Layout::nhwc && w.layout() != Layout::opaque &&
         w.layout() != Layout::nhwc;
}

void StridedPointwiseBackwardData::run(dnnl::stream& stream, const Tensor& dx, const Tensor& dy, const Tensor& w) {
  const Conv2dDesc& d = desc_;
  const std::int64_t p = d.out_h(), q = d.out_w();
  auto* dense = static_cast<float*>(scratch_->get(kScratchSlot, static_cast<std::size_t>(d.n * p * q * d.c) * sizeof(float)));
  const auto mem = [&](const dnnl::memory::desc& md, void* data) { return dnnl::memory(md, engine_, data); };
  matmul_.execute(stream, {{DNNL_ARG_SRC, mem(pd_.src_desc(), dy.data())},
                           {DNNL_ARG_WEIGHTS, mem(pd_.weights_desc(), w.data())},
                           {DNNL_ARG_DST, mem(pd_.dst_desc(), dense)}});
  stream.wait();
  // Every dx pixel once: the dense row of the output pixel that reads it, or zeros.
  auto* out = static_cast<float*>(dx.data());
  const std::int64_t rows = d.n * d.h;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t n = r / d.h, h = r % d.h;
    float* row = out + r * d.w * d.c;
    for (std::int64_t x = 0; x < d.w; ++x) {
      float* pixel = row + x * d.c;
      if (h % d.stride_h != 0 || x % d.stride_w != 0) {
        std::fill(pixel, pixel + d.c, 0.0f);
      } else {
        const float* src = dense + ((n * p + h / d.stride_h) * q + x / d.stride_w) * d.c;
        std::copy(src, src + d.c, pixel);
      }
    }
  }
}

}  // namespace kiln::cpu
