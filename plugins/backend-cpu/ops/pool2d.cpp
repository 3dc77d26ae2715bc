// Max / average pooling forward and backward through oneDNN, planned once per layer+shape.
//
// Decisions: the primitives work in the caller's layout (NCHW or channels-last; all operands of
// one call share it) and are built on first use for that layout and rebuilt if it changes; f32
// or bf16 data is read directly, f16 data (and bf16 data where oneDNN has no bf16 kernels) is
// converted to f32 at the edges (stored 16-bit, computed f32). Max pooling runs forward_training and keeps oneDNN's argmax workspace in the plan, so the
// backward routes each gradient to the element the LAST forward with this plan picked (x and y
// are checked but not read). Average pooling counts the padding in the divisor, PyTorch's
// AvgPool2d default (count_include_pad=True): Pool2dDesc has no field to choose otherwise.
// Output sizes use floor division (no ceil_mode); padding on the far side is the smallest
// non-negative value that gives Pool2dDesc::out_h/out_w. Max pooling of channels-last f32, bf16
// and f16 tensors runs Kiln's own loops instead (maxpool_nhwc.hpp: oneDNN's AVX2 nhwc pooling ran
// at 11% of the copy bandwidth), with its argmax (one byte per output value) in the plan.
#include <omp.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "ops/dnnl_edge.hpp"
#include "ops/onednn_compat.hpp"
#include "ops/maxpool_nhwc.hpp"
#include "ops/plans.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

using dims = dnnl::memory::dims;

class PoolPlan final : public OpPlan {
 public:
  PoolPlan(const Pool2dDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch,
           bool bf16_primitives)
      : desc(d), bf16_primitives_(bf16_primitives), engine_(engine), scratch_(std::move(scratch)) {
    build(Layout::row_major);  // validates the geometry with oneDNN at plan time
  }

  Layout forward_layout() const noexcept { return layout_; }
  /// Makes sure the primitives are built for data in `layout`.
  void use_layout(Layout layout) {
    if (layout != layout_) build(layout);
  }

  const Pool2dDesc desc;
  dnnl::pooling_forward forward;
  dnnl::pooling_backward backward;
  Edge x, y, dx, dy;
  dnnl::memory workspace;
  std::unordered_map<int, dnnl::memory> forward_args, backward_args;
  bool has_forward = false;  // the max backward needs a forward's workspace
  /// Kiln's max pooling (maxpool_nhwc.hpp): its argmax, and whether the last forward was Kiln's
  /// (then the backward must be too: the argmax is there, not in oneDNN's workspace).
  std::vector<std::uint8_t> kiln_argmax;
  bool kiln_forward = false;

  std::vector<float> kiln_scratch;  // the 16-bit forms' f32 images

  /// Whether Kiln's max pooling takes these tensors: f32, bf16 or f16, channels-last.
  bool kiln_takes(const Tensor& a, const Tensor& b) const {
    const DType t = a.dtype();
    return maxpool_nhwc_fits(desc) && (t == DType::f32 || t == DType::bf16 || t == DType::f16) && b.dtype() == t &&
           a.layout() == Layout::nhwc && b.layout() == Layout::nhwc;
  }
  /// The 16-bit forms' scratch for the team about to run (use_our_threads() has set its size).
  float* scratch_16() {
    kiln_scratch.resize(maxpool_nhwc_16_scratch_floats(desc, omp_get_max_threads()));
    return kiln_scratch.data();
  }

 private:
  void build(Layout layout) {
    const Pool2dDesc& d = desc;
    const std::int64_t p = d.out_h(), q = d.out_w();
    const dims src_dims{d.n, d.c, d.h, d.w}, dst_dims{d.n, d.c, p, q};
    const DType compute = compute_dtype(d.dtype, bf16_primitives_);
    const auto src = user_desc(src_dims, compute, layout);
    const auto dst = user_desc(dst_dims, compute, layout);
    const dims strides{d.stride_h, d.stride_w}, kernel{d.kernel_h, d.kernel_w};
    const dims pad_l{d.pad_h, d.pad_w};
    const dims pad_r{std::max<std::int64_t>(0, (p - 1) * d.stride_h + d.kernel_h - d.h - d.pad_h),
                     std::max<std::int64_t>(0, (q - 1) * d.stride_w + d.kernel_w - d.w - d.pad_w)};
    const auto algo = d.kind == Pool2dDesc::Kind::max ? dnnl::algorithm::pooling_max
                                                      : dnnl::algorithm::pooling_avg_include_padding;
    const auto fpd = onednn::pooling_forward(engine_, dnnl::prop_kind::forward_training, algo, src, dst, strides,
                                             kernel, pad_l, pad_r);
    forward = dnnl::pooling_forward(fpd);
    backward = dnnl::pooling_backward(
        onednn::pooling_backward(engine_, algo, src, dst, strides, kernel, pad_l, pad_r, fpd));
    x = Edge(engine_, user_desc(src_dims, d.dtype, layout), src, scratch_, 0);
    y = Edge(engine_, user_desc(dst_dims, d.dtype, layout), dst, scratch_, 1);
    dx = Edge(engine_, user_desc(src_dims, d.dtype, layout), src, scratch_, 2);
    dy = Edge(engine_, user_desc(dst_dims, d.dtype, layout), dst, scratch_, 3);
    forward_args = {{DNNL_ARG_SRC, x.inner()}, {DNNL_ARG_DST, y.inner()}};
    backward_args = {{DNNL_ARG_DIFF_DST, dy.inner()}, {DNNL_ARG_DIFF_SRC, dx.inner()}};
    workspace = dnnl::memory();
    if (fpd.workspace_desc().get_size() > 0) {
      workspace = dnnl::memory(fpd.workspace_desc(), engine_);  // lives with the plan
      forward_args.emplace(DNNL_ARG_WORKSPACE, workspace);
      backward_args.emplace(DNNL_ARG_WORKSPACE, workspace);
    }
    layout_ = layout;
    has_forward = false;  // a rebuilt plan has a fresh (empty) workspace
  }

  bool bf16_primitives_;
  dnnl::engine engine_;
  std::shared_ptr<EdgeScratch> scratch_;
  Layout layout_ = Layout::row_major;
};

using sdk::describe;  // the shared wording (kiln/sdk/op_descs.hpp)

}  // namespace

std::shared_ptr<OpPlan> CpuBackend::plan_pool2d(const Pool2dDesc& d) {
  // The op table (op_table.hpp) decides which dtypes get a plan; anything else is the base refusal.
  if (!supports(Op::pool2d_forward, d.dtype)) unsupported(Op::pool2d_forward, d.dtype);
  const OpCheck check(Op::pool2d_forward);
  sdk::check_pool2d_desc(check, d);
  try {
    return std::make_shared<PoolPlan>(d, engine_, edge_scratch_, bf16_primitives_);
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN cannot plan {}: {}", describe(d), e.what()));
  }
}

void CpuBackend::pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) {
  const OpCheck check(Op::pool2d_forward);
  PoolPlan& p = plan_as<PoolPlan>(check, plan, "plan_pool2d");
  const Pool2dDesc& d = p.desc;
  sdk::check_pool2d_forward(check, d, sdk::MixedLayouts::refused, y, x);
  use_our_threads();
  if (p.kiln_takes(x, y)) {
    p.kiln_argmax.resize(static_cast<std::size_t>(y.numel()));
    if (x.dtype() == DType::f32) {
      maxpool_nhwc_forward(d, static_cast<const float*>(x.data()), static_cast<float*>(y.data()), p.kiln_argmax.data());
    } else {
      maxpool_nhwc_forward_16(d, x.dtype(), static_cast<const std::uint16_t*>(x.data()),
                              static_cast<std::uint16_t*>(y.data()), p.kiln_argmax.data(), p.scratch_16());
    }
    p.kiln_forward = p.has_forward = true;
    return;
  }
  try {
    p.use_layout(x.layout());
    p.x.bind(x.data());
    p.y.bind(y.data());
    p.x.pull(stream_);
    p.forward.execute(stream_, p.forward_args);
    p.y.push(stream_);
    stream_.wait();
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN failed for {} with y {}, x {}: {}", describe(d), y.describe(),
                           x.describe(), e.what()));
  }
  p.has_forward = true;
  p.kiln_forward = false;
}

void CpuBackend::pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                 const Tensor& y) {
  const OpCheck check(Op::pool2d_backward);
  PoolPlan& p = plan_as<PoolPlan>(check, plan, "plan_pool2d");
  const Pool2dDesc& d = p.desc;
  sdk::check_pool2d_backward(check, d, sdk::MixedLayouts::refused, dx, dy, x, y);
  const bool max = d.kind == Pool2dDesc::Kind::max;
  const bool same_path = p.kiln_forward ? p.kiln_takes(dx, dy) : p.forward_layout() == dx.layout() && !p.kiln_takes(dx, dy);
  if (max && (!p.has_forward || !same_path)) {
    check.fail(fmt::format("{}: backward called before any forward with this plan in this layout and dtype; max "
                           "pooling routes gradients through the forward's saved argmax",
                           describe(d)));
  }
  use_our_threads();
  if (max && p.kiln_forward) {
    if (dx.dtype() == DType::f32) {
      maxpool_nhwc_backward(d, static_cast<const float*>(dy.data()), p.kiln_argmax.data(), static_cast<float*>(dx.data()));
    } else {
      maxpool_nhwc_backward_16(d, dx.dtype(), static_cast<const std::uint16_t*>(dy.data()), p.kiln_argmax.data(),
                               static_cast<std::uint16_t*>(dx.data()), p.scratch_16());
    }
    return;
  }
  try {
    p.use_layout(dx.layout());
    p.dy.bind(dy.data());
    p.dx.bind(dx.data());
    p.dy.pull(stream_);
    p.backward.execute(stream_, p.backward_args);
    p.dx.push(stream_);
    stream_.wait();
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN failed for {} with dx {}, dy {}: {}", describe(d),
                           dx.describe(), dy.describe(), e.what()));
  }
}

}  // namespace kiln::cpu
