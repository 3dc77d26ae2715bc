// conv2d forward / backward-data / backward-filter through oneDNN, planned once per layer+shape.
//
// Decisions: activations inside the primitives are channels-last (nhwc: oneDNN 2.6's brgemm
// convolutions are as fast on it as on their own blocked layouts, measured on ResNet-50's layers,
// and batch-norm, pooling and the element-wise ops read it directly) -- except where the backend
// chose the blocked layout (`conv_layout`, AVX2 CPUs by default: oneDNN's AVX2 kernels are ~20%
// slower on nhwc), whose reorders the edges do like any other layout change; weights use whatever
// blocked layout oneDNN picks (format_tag::any). The backward primitives are hinted by a
// forward_training descriptor in the plan's compute dtype. Edges (dnnl_edge.hpp) reorder the
// caller's tensors at the boundary only where they differ: NCHW activations (tests), OIHW
// weights, f32 master weights read by a bf16 plan, and f16 operands, which are stored f16 but
// computed in f32 (compute_dtype); so are bf16 operands where oneDNN has no bf16 kernels, and
// there an f32 input of a bf16 plan is rounded to bf16 on its way in (EdgeRound::bf16), as the
// native bf16 primitive's reorder would. Each primitive is built on first use with the dtypes and
// layouts of the tensors it is called with and rebuilt only if they change. Outputs keep their
// own dtype (bf16 plan: y/dx f32 or bf16, dw f32 for fp32 master gradients). Accumulate::yes on
// dw is a reorder with a sum post-op. Padding on the far side is the smallest non-negative value
// giving Conv2dDesc::out_h/out_w. Pointwise convolutions on channels-last tensors run as plain
// strided matmuls instead (conv1x1_matmul.hpp: no weight edges at all) where the backend's
// `conv1x1` option says so, per direction (PointwiseRoute). Backward-filter runs Kiln's AVX2
// kernel (conv_filter_avx2.hpp) where the `conv_filter` option says so and the shape fits and
// pays; forward and backward-data of plans that compute in f32 run Kiln's AVX2 direct convolution
// (conv_direct_avx2.hpp) where the `conv_direct` option says so, the shape fits and pays, and no
// Winograd path takes the call. 3x3 convolutions of plans that compute in f32 run oneDNN's
// Winograd kernels where the backend's `conv3x3` option says so, the shape is one where they were
// measured faster (winograd_pays: channels in blocks of 16, enough output positions in the batch)
// and oneDNN takes it in all three directions (2.6 from AVX-512 up, 3.2 nowhere; it refuses strides and dilations); those kernels work on
// oneDNN's blocked activation layout only, so such a plan's activations are reordered at the
// edges like `conv_layout = "blocked"` ones. On AVX2 CPUs and with a oneDNN without Winograd the
// `conv3x3` option runs Kiln's own Winograd instead (winograd3x3.hpp) for the calls whose tensors
// it takes (f32, f16 or bf16, channels-last), where kiln_winograd_pays; the plan keeps the primitives
// for the other calls.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "kiln/errors.hpp"
#include "ops/conv1x1_matmul.hpp"
#include "ops/conv_direct_avx2.hpp"
#include "ops/conv_filter_avx2.hpp"
#include "ops/dnnl_edge.hpp"
#include "ops/onednn_compat.hpp"
#include "ops/plans.hpp"
#include "ops/winograd3x3.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

std::int64_t far_padding(std::int64_t in, std::int64_t pad, std::int64_t extent,
                         std::int64_t stride, std::int64_t out) {
  return std::max<std::int64_t>(0, (out - 1) * stride + extent - in - pad);
}

/// What a cached primitive was built for: one operand's dtype and layout.
struct Operand {
  DType dtype;
  Layout layout;
  bool operator==(const Operand&) const = default;
};
Operand operand(const Tensor& t) { return {t.dtype(), t.layout()}; }

/// Where oneDNN 2.6's Winograd kernels beat its direct ones (Zen 4, 2 threads, all three
/// directions; docs/benchmarks.md, "3x3 convolutions by Winograd"). They take any channel count
/// but pad it to blocks of 16, and their input and output transforms cost about as much as they
/// save when the batch holds few output positions (n * out_h * out_w): from 784 up they were
/// 1.1-2x faster (16 to 512 channels, batch 1 to 8); at 392 only with 256 channels or more
/// (batch 8 at 7x7: 1.3x faster with 512, even with 128, slower with 64; batch 2 at 14x14 with
/// 256: 1.1x faster); below that 1.2-5x slower (batch 1 at 14x14 and 7x7, batch 2 at 7x7, 4x4
/// and 2x2 outputs).
bool winograd_pays(const Conv2dDesc& d) {
  const bool whole_blocks = d.c % 16 == 0 && d.k % 16 == 0;
  const std::int64_t positions = d.n * d.out_h() * d.out_w();
  return d.groups == 1 && whole_blocks && (positions >= 784 || (positions >= 392 && std::min(d.c, d.k) >= 256));
}

/// Where Kiln's AVX2 Winograd beats oneDNN's direct AVX2 convolution with its blocked-layout
/// edges (Zen 2 EPYC, 2 threads, ResNet-50's four stride-1 3x3 shapes at batch 1, 2, 4, 8 and 16,
/// all three directions; bench/conv3x3_winograd, docs/benchmarks.md): with 64 or more 4x4 output
/// tiles in the batch it was 1.2-2.8x faster (512 channels at 7x7, batch 16, the least); with 32
/// to 63 tiles only up to 256 channels (128 at 28x28 batch 1: 2.1x; 256 at 14x14 batch 2: 1.07x),
/// while 512 at 7x7 batch 8 (32 tiles) was 1.2x slower: the filter transforms, 36 x C x K values
/// per call, outweigh the few tiles' savings. Measured up to 512 channels only: above that the
/// filter points alone (36 x C x K floats, 38 MB at 512) would grow past what was measured, so
/// wider layers stay direct.
bool kiln_winograd_pays(const Conv2dDesc& d) {
  const std::int64_t tiles = d.n * ((d.out_h() + 3) / 4) * ((d.out_w() + 3) / 4);
  const std::int64_t widest = std::max(d.c, d.k);
  return widest <= 512 && (tiles >= 64 || (tiles >= 32 && widest <= 256));
}

/// Which directions of a pointwise convolution run as matmuls instead of oneDNN's convolution.
struct PointwiseRoute {
  bool forward = false, backward_data = false, filter = false;
  /// Strided 1x1s' backward-data too (StridedPointwiseBackwardData, f32 plans): measured on AVX2
  /// only, so not part of the AVX-512 default.
  bool strided_backward_data = false;

  bool any() const { return forward || backward_data || filter; }
};

/// The backend's conv1x1 mode for a plan of this dtype (cpu_backend.cpp says where each pays).
PointwiseRoute pointwise_route(Conv1x1Mode mode, DType plan) {
  const PointwiseRoute none{};
  const bool f32 = plan == DType::f32;
  switch (mode) {
    case Conv1x1Mode::matmul: return {true, true, true, f32};
    case Conv1x1Mode::f32_matmul: return f32 ? PointwiseRoute{true, true, true} : none;
    case Conv1x1Mode::f32_backward_data_matmul: return f32 ? PointwiseRoute{false, true, false, true} : none;
    case Conv1x1Mode::conv: return none;
  }
  return none;
}

class ConvPlan final : public OpPlan {
 public:
  ConvPlan(const Conv2dDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch,
           bool bf16_primitives, bool blocked_layout, PointwiseRoute pointwise_route, Conv3x3Mode conv3x3,
           ConvFilterMode conv_filter, ConvDirectMode conv_direct)
      : desc(d), compute(compute_dtype(d.dtype, bf16_primitives)), route(pointwise_route),
        bf16_primitives_(bf16_primitives),
        activation_tag_(blocked_layout ? tag::any : tag::nhwc), engine_(engine), scratch_(std::move(scratch)) {
    const std::int64_t p = d.out_h(), q = d.out_w();
    src_ = {d.n, d.c, d.h, d.w};
    dst_ = {d.n, d.k, p, q};
    wei_ = d.groups == 1 ? dims{d.k, d.c, d.r, d.s}
                         : dims{d.groups, d.k / d.groups, d.c / d.groups, d.r, d.s};
    strides_ = {d.stride_h, d.stride_w};
    dilates_ = {d.dilation_h - 1, d.dilation_w - 1};
    pad_l_ = {d.pad_h, d.pad_w};
    pad_r_ = {far_padding(d.h, d.pad_h, d.dilation_h * (d.r - 1) + 1, d.stride_h, p),
              far_padding(d.w, d.pad_w, d.dilation_w * (d.s - 1) + 1, d.stride_w, q)};
    if (conv3x3 == Conv3x3Mode::onednn_winograd && winograd_takes()) {
      algorithm_ = dnnl::algorithm::convolution_winograd;
      activation_tag_ = tag::any;
    }
    hint_ = forward_pd(compute);
    if (route.any() && is_pointwise(d)) pointwise.emplace(d, engine_, scratch_, bf16_primitives);
    // The dense product pays with few output pixels (Zen 2, batch 8: 1024 -> 2048 at 7x7, 392
    // pixels, 1.8x; 512 -> 1024 at 14x14, 1568, 1.1-1.3x) and lost at 6272 (256 -> 512 at 28x28,
    // 0.85x: its scratch and dx passes outweigh the matmul's gain).
    const bool few_pixels = d.n * d.out_h() * d.out_w() <= 2048;
    if (route.strided_backward_data && d.dtype == DType::f32 && is_strided_pointwise(d) && few_pixels) {
      strided_backward_data.emplace(d, engine_, scratch_);
    }
    // Plans that compute in f32 only (as oneDNN's Winograd above): a bf16 plan with bf16
    // primitives computes in bf16, and Kiln's transforms would change what it computes.
    if (conv3x3 == Conv3x3Mode::kiln_winograd && compute == DType::f32 && Winograd3x3::fits(d) &&
        kiln_winograd_pays(d)) {
      winograd.emplace(d, engine_, scratch_);
    }
    // Kiln's AVX2 backward-filter: plans that compute in f32, shapes it fits where it pays, and
    // not where a Winograd path above computes the backward-filter.
    if (conv_filter == ConvFilterMode::kiln_avx2 && compute == DType::f32 && ConvFilterAvx2::fits(d) &&
        ConvFilterAvx2::pays(d) && !winograd && algorithm_ != dnnl::algorithm::convolution_winograd) {
      filter.emplace(d, scratch_);
    }
    // Kiln's AVX2 direct convolution: plans that compute in f32 (as the backward-filter above).
    if (conv_direct == ConvDirectMode::kiln_avx2 && compute == DType::f32 && ConvDirectAvx2::pays(d) &&
        algorithm_ != dnnl::algorithm::convolution_winograd) {
      direct.emplace(d, scratch_);
    }
  }

  const Conv2dDesc desc;
  const DType compute;  // the dtype the primitives compute in (f16 plans, bf16 without bf16 kernels: f32)
  /// The matmul paths of a pointwise convolution, where the backend chose one for some direction
  /// (`route`); used for the calls whose tensors they take (Conv1x1Matmul::takes), the others
  /// run the convolution primitives.
  std::optional<Conv1x1Matmul> pointwise;
  /// A strided 1x1's backward-data as one batched matmul, where the route says so (f32 plans).
  std::optional<StridedPointwiseBackwardData> strided_backward_data;
  const PointwiseRoute route;
  /// Kiln's AVX2 backward-filter (conv_filter_avx2.hpp), where the backend chose it and the shape
  /// fits and pays; used for the calls whose tensors it takes, before the pointwise matmul.
  std::optional<ConvFilterAvx2> filter;
  /// Kiln's AVX2 direct convolution (conv_direct_avx2.hpp) for forward and backward-data, where the
  /// backend chose it and the shape fits and pays; used for the calls whose tensors it takes that
  /// no Winograd path takes.
  std::optional<ConvDirectAvx2> direct;
  /// Kiln's AVX2 Winograd (winograd3x3.hpp), where the backend chose it and the shape pays; used
  /// for the calls whose tensors it takes (f32, f16 or bf16, channels-last), the others run the primitives.
  std::optional<Winograd3x3> winograd;

  /// One primitive (forward, backward-data or backward-filter) with its edges, and the operands
  /// it was built for.
  struct Stage : EdgedPrimitive {
    Operand in0, in1, out;

    bool built_for(const Operand& a, const Operand& b, const Operand& o) const {
      return in0 == a && in1 == b && out == o;
    }
  };

  /// Which path the plan's own primitives count as (ops/conv_paths.hpp).
  ConvPath primitive_path() const {
    return algorithm_ == dnnl::algorithm::convolution_winograd ? ConvPath::onednn_winograd : ConvPath::onednn;
  }

  Stage& forward(const Tensor& x, const Tensor& w, const Tensor& y) {
    const Operand ox = operand(x), ow = operand(w), oy = operand(y);
    if (fwd_ && fwd_->built_for(ox, ow, oy)) return *fwd_;
    const DType out = compute_dtype(y.dtype(), bf16_primitives_);
    const auto pd = out == compute ? hint_ : forward_pd(out);
    fwd_.emplace(Stage{{dnnl::convolution_forward(pd), {},
                        Edge(engine_, user(src_, ox), pd.src_desc(), scratch_, 0, EdgeSum::no, round(ox)),
                        Edge(engine_, user(wei_, ow), pd.weights_desc(), scratch_, 1, EdgeSum::no, round(ow)),
                        Edge(engine_, user(dst_, oy), pd.dst_desc(), scratch_, 2), {}},
                       ox, ow, oy});
    fwd_->args = {{DNNL_ARG_SRC, fwd_->e0.inner()},
                  {DNNL_ARG_WEIGHTS, fwd_->e1.inner()},
                  {DNNL_ARG_DST, fwd_->eo.inner()}};
    return *fwd_;
  }

  Stage& backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
    const Operand ody = operand(dy), ow = operand(w), odx = operand(dx);
    if (bwd_data_ && bwd_data_->built_for(ody, ow, odx)) return *bwd_data_;
    const auto pd = onednn::convolution_backward_data(
        engine_, algorithm_, activation(src_, compute_dtype(dx.dtype(), bf16_primitives_)), any(wei_, compute),
        activation(dst_, compute), strides_, dilates_, pad_l_, pad_r_, hint_);
    bwd_data_.emplace(Stage{{dnnl::convolution_backward_data(pd), {},
                             Edge(engine_, user(dst_, ody), pd.diff_dst_desc(), scratch_, 0, EdgeSum::no, round(ody)),
                             Edge(engine_, user(wei_, ow), pd.weights_desc(), scratch_, 1, EdgeSum::no, round(ow)),
                             Edge(engine_, user(src_, odx), pd.diff_src_desc(), scratch_, 2), {}},
                            ody, ow, odx});
    bwd_data_->args = {{DNNL_ARG_DIFF_DST, bwd_data_->e0.inner()},
                       {DNNL_ARG_WEIGHTS, bwd_data_->e1.inner()},
                       {DNNL_ARG_DIFF_SRC, bwd_data_->eo.inner()}};
    return *bwd_data_;
  }

  Stage& backward_filter(const Tensor& x, const Tensor& dy, const Tensor& dw) {
    const Operand ox = operand(x), ody = operand(dy), odw = operand(dw);
    if (bwd_filter_ && bwd_filter_->built_for(ox, ody, odw)) return *bwd_filter_;
    const auto pd = onednn::convolution_backward_weights(
        engine_, algorithm_, activation(src_, compute), any(wei_, compute_dtype(dw.dtype(), bf16_primitives_)),
        activation(dst_, compute), strides_, dilates_, pad_l_, pad_r_, hint_);
    bwd_filter_.emplace(
        Stage{{dnnl::convolution_backward_weights(pd), {},
               Edge(engine_, user(src_, ox), pd.src_desc(), scratch_, 0, EdgeSum::no, round(ox)),
               Edge(engine_, user(dst_, ody), pd.diff_dst_desc(), scratch_, 1, EdgeSum::no, round(ody)),
               Edge(engine_, user(wei_, odw), pd.diff_weights_desc(), scratch_, 2, EdgeSum::yes), {}},
              ox, ody, odw});
    bwd_filter_->args = {{DNNL_ARG_SRC, bwd_filter_->e0.inner()},
                         {DNNL_ARG_DIFF_DST, bwd_filter_->e1.inner()},
                         {DNNL_ARG_DIFF_WEIGHTS, bwd_filter_->eo.inner()}};
    return *bwd_filter_;
  }

 private:
  /// An f32 input of a bf16 plan computed in f32 is rounded to bf16 first (what a bf16 primitive
  /// reads); every other input goes in as it is.
  EdgeRound round(const Operand& o) const {
    const bool rounds = desc.dtype == DType::bf16 && compute == DType::f32 && o.dtype == DType::f32;
    return rounds ? EdgeRound::bf16 : EdgeRound::none;
  }
  static dnnl::memory::desc any(const dims& shape, DType d) {
    return dnnl::memory::desc(shape, dnnl_dtype(d), tag::any);
  }
  /// An activation operand inside a primitive: nhwc, or (blocked layout) oneDNN's choice.
  dnnl::memory::desc activation(const dims& shape, DType d) const {
    return dnnl::memory::desc(shape, dnnl_dtype(d), activation_tag_);
  }
  static dnnl::memory::desc user(const dims& shape, const Operand& o) {
    return user_desc(shape, o.dtype, o.layout);
  }
  dnnl::convolution_forward::primitive_desc forward_pd(DType y) const {
    return onednn::convolution_forward(engine_, dnnl::prop_kind::forward_training, algorithm_, activation(src_, compute),
                                       any(wei_, compute), activation(dst_, y), strides_, dilates_, pad_l_, pad_r_);
  }

  /// Whether this plan runs by Winograd: f32 compute, a 3x3 kernel, a shape where it was measured
  /// faster (winograd_pays), and oneDNN has the kernels in all three directions (it refuses
  /// strides and dilations; asking is exact where restating its rules would drift). Only
  /// "unimplemented" means no: any other error is a real one.
  bool winograd_takes() const {
    if (compute != DType::f32 || desc.r != 3 || desc.s != 3 || !winograd_pays(desc)) return false;
    const auto act = [](const dims& shape) { return dnnl::memory::desc(shape, dnnl::memory::data_type::f32, tag::any); };
    const auto alg = dnnl::algorithm::convolution_winograd;
    try {
      const auto fwd = onednn::convolution_forward(engine_, dnnl::prop_kind::forward_training, alg, act(src_),
                                                   any(wei_, DType::f32), act(dst_), strides_, dilates_, pad_l_, pad_r_);
      onednn::convolution_backward_data(engine_, alg, act(src_), any(wei_, DType::f32), act(dst_), strides_, dilates_,
                                        pad_l_, pad_r_, fwd);
      onednn::convolution_backward_weights(engine_, alg, act(src_), any(wei_, DType::f32), act(dst_), strides_,
                                           dilates_, pad_l_, pad_r_, fwd);
      return true;
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) return false;
      throw;
    }
  }

  bool bf16_primitives_;
  dnnl::algorithm algorithm_ = dnnl::algorithm::convolution_direct;
  tag activation_tag_;
  dnnl::engine engine_;
  std::shared_ptr<EdgeScratch> scratch_;
  dims src_, wei_, dst_, strides_, dilates_, pad_l_, pad_r_;
  dnnl::convolution_forward::primitive_desc hint_;
  std::optional<Stage> fwd_, bwd_data_, bwd_filter_;
};

using sdk::describe;  // the shared wording (kiln/sdk/op_descs.hpp)

}  // namespace

std::shared_ptr<OpPlan> CpuBackend::plan_conv2d(const Conv2dDesc& d) {
  // The op table (op_table.hpp) decides which dtypes get a plan; anything else is the base refusal.
  if (!supports(Op::conv2d_forward, d.dtype)) unsupported(Op::conv2d_forward, d.dtype);
  const OpCheck check(Op::conv2d_forward);
  sdk::check_conv2d_desc(check, d);
  try {
    return std::make_shared<ConvPlan>(d, engine_, edge_scratch_, bf16_primitives_, blocked_conv_layout_,
                                      pointwise_route(conv1x1_, d.dtype), conv3x3_, conv_filter_,
                                      conv_direct_);
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN cannot plan {}: {}", describe(d), e.what()));
  }
}

void CpuBackend::conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) {
  const OpCheck check(Op::conv2d_forward);
  ConvPlan& p = plan_as<ConvPlan>(check, plan, "plan_conv2d");
  sdk::check_conv2d_forward(check, p.desc, y, x, w);
  use_our_threads();
  try {
    const auto ran = [&](ConvPath path) { conv_paths_.add(ConvDirection::forward, path); };
    if (p.pointwise && p.route.forward && Conv1x1Matmul::takes(x, y, w)) {
      p.pointwise->forward(stream_, y, x, w);
      ran(ConvPath::matmul);
    } else if (p.winograd && Winograd3x3::takes(x, y, w)) {
      p.winograd->forward(stream_, y, x, w);
      ran(ConvPath::kiln_winograd);
    } else if (p.direct && p.direct->takes(y, x, w)) {
      p.direct->forward(y, x, w);
      ran(ConvPath::kiln_avx2);
    } else {
      p.forward(x, w, y).run(stream_, x.data(), w.data(), y.data());
      ran(p.primitive_path());
    }
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN failed for {} with y {}, x {}, w {}: {}", describe(p.desc),
                           y.describe(), x.describe(), w.describe(), e.what()));
  }
}

void CpuBackend::conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy,
                                      const Tensor& w) {
  const OpCheck check(Op::conv2d_backward_data);
  ConvPlan& p = plan_as<ConvPlan>(check, plan, "plan_conv2d");
  sdk::check_conv2d_backward_data(check, p.desc, dx, dy, w);
  use_our_threads();
  try {
    const auto ran = [&](ConvPath path) { conv_paths_.add(ConvDirection::backward_data, path); };
    if (p.pointwise && p.route.backward_data && Conv1x1Matmul::takes(dy, dx, w)) {
      p.pointwise->backward_data(stream_, dx, dy, w);
      ran(ConvPath::matmul);
    } else if (p.strided_backward_data && StridedPointwiseBackwardData::takes(dx, dy, w)) {
      p.strided_backward_data->run(stream_, dx, dy, w);
      ran(ConvPath::strided_matmul);
    } else if (p.winograd && Winograd3x3::takes(dy, dx, w)) {
      p.winograd->backward_data(stream_, dx, dy, w);
      ran(ConvPath::kiln_winograd);
    } else if (p.direct && p.direct->takes(dx, dy, w)) {
      p.direct->backward_data(dx, dy, w);
      ran(ConvPath::kiln_avx2);
    } else {
      p.backward_data(dy, w, dx).run(stream_, dy.data(), w.data(), dx.data());
      ran(p.primitive_path());
    }
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN failed for {} with dx {}, dy {}, w {}: {}", describe(p.desc),
                           dx.describe(), dy.describe(), w.describe(), e.what()));
  }
}

void CpuBackend::conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy,
                                        const Tensor& x, Accumulate acc) {
  const OpCheck check(Op::conv2d_backward_filter);
  ConvPlan& p = plan_as<ConvPlan>(check, plan, "plan_conv2d");
  sdk::check_conv2d_backward_filter(check, p.desc, dw, dy, x);
  use_our_threads();
  try {
    const auto ran = [&](ConvPath path) { conv_paths_.add(ConvDirection::backward_filter, path); };
    if (p.filter && p.filter->takes(dw, dy, x)) {
      p.filter->run(dw, dy, x, acc);
      ran(ConvPath::kiln_avx2);
    } else if (p.pointwise && p.route.filter && Conv1x1Matmul::takes(x, dy, dw)) {
      p.pointwise->backward_filter(stream_, dw, dy, x, acc);
      ran(ConvPath::matmul);
    } else if (p.winograd && Winograd3x3::takes(x, dy, dw)) {
      p.winograd->backward_filter(stream_, dw, dy, x, acc);
      ran(ConvPath::kiln_winograd);
    } else {
      p.backward_filter(x, dy, dw).run(stream_, x.data(), dy.data(), dw.data(), acc);
      ran(p.primitive_path());
    }
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN failed for {} with dw {}, dy {}, x {}: {}", describe(p.desc),
                           dw.describe(), dy.describe(), x.describe(), e.what()));
  }
}

}  // namespace kiln::cpu
