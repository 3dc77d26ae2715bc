// conv2d forward / backward-data / backward-filter through cuDNN (legacy API), planned once per
// layer and shape (dnn/conv_plan.hpp).
//
// Decisions: each call runs in the working layout of its main activation input (x for forward
// and backward-filter, dy for backward-data); other tensors that differ in dtype or layout are
// staged through workspace (dnn/staging.hpp), so callers may mix layouts and a bf16/f16 plan may
// read f32 master weights and write f32 outputs, as on the cpu backend. Weights are always OIHW
// in the caller's memory; an NHWC call reads them converted to KRSC (cuDNN's tensor-core filter
// order). The forward converts them into the plan's filter copy and the backward-data call that
// follows reads that copy instead of converting again (dnn/filter_copy.hpp says when that is
// allowed; [backend] conv_filter_reuse = false converts in every call). dw (+)= via cuDNN's beta
// when cuDNN writes dw directly, otherwise via the staging's accumulate. Workspace comes from the
// backend's caching allocator per call. An algorithm cuDNN refuses when it runs is replaced by the
// next usable candidate (ConvPlan::run, dnn/conv_plan.hpp).
#include <fmt/format.h>

#include <optional>

#include "cuda_backend.hpp"
#include "kiln/sdk/op_args.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "dnn/conv_plan.hpp"
#include "dnn/dnn_check.hpp"
#include "dnn/staging.hpp"

namespace kiln::cuda {
namespace {

ConvPlan& conv_plan(const DnnCheck& check, OpPlan& plan) {
  auto* p = dynamic_cast<ConvPlan*>(&plan);
  if (p == nullptr) {
    check.fail("the plan passed was not made by the cuda backend's plan_conv2d; pass the plan "
               "this layer got from plan_conv2d for the same shapes");
  }
  return *p;
}

Tensor workspace_for(CudaBackend& backend, const AlgoChoice& a) {
  return a.workspace_bytes > 0 ? backend.workspace(a.workspace_bytes) : Tensor();
}

void* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

FilterUse filter_use(const Tensor& w, DType dt, Layout working) {
  return FilterUse{w.data(), w.numel(), w.dtype(), dt, working};
}

/// The filter operand of one cuDNN call: the caller's weights in place, converted scratch, or the
/// plan's filter copy. Keep it alive until the call is enqueued.
struct FilterOperand {
  std::optional<Staged> staged;
  const void* copy = nullptr;
  const void* data() const { return copy != nullptr ? copy : staged->data(); }
};

/// The forward's filter: converted into the plan's copy when the call needs a conversion and
/// reuse is on, so the backward-data call that follows can read it.
FilterOperand forward_filter(CudaBackend& backend, const DnnCheck& check, ConvPlan& p, const Tensor& w,
                             Layout working) {
  const DType dt = p.desc.dtype;
  p.filter_ledger.forward_begins();
  FilterOperand out;
  const bool converts = w.dtype() != dt || working != Layout::row_major;
  if (!converts || !backend.conv_filter_reuse()) {
    out.staged.emplace(Staged::input(backend, check, w, Layout::row_major, p.w_dims, dt, working));
    return out;
  }
  if (!p.filter_copy.defined()) p.filter_copy = backend.allocate({p.w_dims.numel()}, dt, MemoryKind::device);
  convert_4d(backend, check, p.filter_copy, working, w, Layout::row_major, p.w_dims, Accumulate::no);
  p.filter_ledger.copy_made(filter_use(w, dt, working));
  out.copy = p.filter_copy.data();
  return out;
}

/// The backward-data call's filter: the forward's copy when the ledger allows it, else converted
/// (or in place) as any call.
FilterOperand backward_data_filter(CudaBackend& backend, const DnnCheck& check, ConvPlan& p, const Tensor& w,
                                   Layout working) {
  const DType dt = p.desc.dtype;
  FilterOperand out;
  if (p.filter_ledger.take_for_backward(filter_use(w, dt, working))) {
    backend.count_conv_filter_reuse();
    out.copy = p.filter_copy.data();
    return out;
  }
  out.staged.emplace(Staged::input(backend, check, w, Layout::row_major, p.w_dims, dt, working));
  return out;
}

}  // namespace

std::shared_ptr<OpPlan> CudaBackend::plan_conv2d(const Conv2dDesc& d) {
  // The op table (op_table.hpp) decides which dtypes get a plan; anything else is the base refusal.
  if (!supports(Op::conv2d_forward, d.dtype)) unsupported(Op::conv2d_forward, d.dtype);
  const DnnCheck check(Op::conv2d_forward);
  sdk::check_conv2d_desc(check, d);
  auto plan = std::make_shared<ConvPlan>(d, device().index, math_mode_for(d.dtype, allow_tf32(), conv_transforms()),
                                         cudnn_benchmark() ? AlgoSearch::exhaustive : AlgoSearch::heuristic,
                                         conv_workspace_mib());
  // Descriptors for the layout layers will use are made now, so shape errors surface at build().
  plan->setup(check, activation_layout(d.dtype));
  return plan;
}

void CudaBackend::conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) {
  const DnnCheck check(Op::conv2d_forward);
  ConvPlan& p = conv_plan(check, plan);
  const DType dt = p.desc.dtype;
  sdk::check_conv2d_forward(check, p.desc, y, x, w);
  const Layout L = x.layout();
  ConvPlan::Setup& s = p.setup(check, L);
  const Staged xs = Staged::input(*this, check, x, x.layout(), p.x_dims, dt, L);
  const FilterOperand ws = forward_filter(*this, check, p, w, L);
  Staged ys = Staged::output(*this, check, y, y.layout(), p.y_dims, dt, L);
  const float one = 1.0f, zero = 0.0f;
  p.run(check, cudnn(), s, L, ConvDirection::forward,
        [&](const AlgoChoice& a) {
          const Tensor scratch = workspace_for(*this, a);
          return cudnnConvolutionForward(cudnn(), &one, s.x.get(), xs.data(), s.w.get(), ws.data(), s.conv.get(),
                                         static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), data_or_null(scratch),
                                         a.workspace_bytes, &zero, s.y.get(), ys.data());
        },
        [&](const AlgoChoice& a) {
          return fmt::format("cudnnConvolutionForward (algo {}, {} workspace bytes) for {} "
                             "with y {}, x {}, w {} in {}",
                             a.algo, a.workspace_bytes, describe(p.desc), y.describe(),
                             x.describe(), w.describe(), layout_word(L));
        });
  ys.finish(Accumulate::no);
}

void CudaBackend::conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy,
                                       const Tensor& w) {
  const DnnCheck check(Op::conv2d_backward_data);
  ConvPlan& p = conv_plan(check, plan);
  const DType dt = p.desc.dtype;
  sdk::check_conv2d_backward_data(check, p.desc, dx, dy, w);
  const Layout L = dy.layout();
  ConvPlan::Setup& s = p.setup(check, L);
  const Staged dys = Staged::input(*this, check, dy, dy.layout(), p.y_dims, dt, L);
  const FilterOperand ws = backward_data_filter(*this, check, p, w, L);
  Staged dxs = Staged::output(*this, check, dx, dx.layout(), p.x_dims, dt, L);
  const float one = 1.0f, zero = 0.0f;
  p.run(check, cudnn(), s, L, ConvDirection::backward_data,
        [&](const AlgoChoice& a) {
          const Tensor scratch = workspace_for(*this, a);
          return cudnnConvolutionBackwardData(cudnn(), &one, s.w.get(), ws.data(), s.y.get(), dys.data(), s.conv.get(),
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo),
                                              data_or_null(scratch), a.workspace_bytes, &zero, s.x.get(), dxs.data());
        },
        [&](const AlgoChoice& a) {
          return fmt::format("cudnnConvolutionBackwardData (algo {}, {} workspace bytes) for "
                             "{} with dx {}, dy {}, w {} in {}",
                             a.algo, a.workspace_bytes, describe(p.desc), dx.describe(),
                             dy.describe(), w.describe(), layout_word(L));
        });
  dxs.finish(Accumulate::no);
}

void CudaBackend::conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy,
                                         const Tensor& x, Accumulate acc) {
  const DnnCheck check(Op::conv2d_backward_filter);
  ConvPlan& p = conv_plan(check, plan);
  const DType dt = p.desc.dtype;
  sdk::check_conv2d_backward_filter(check, p.desc, dw, dy, x);
  const Layout L = x.layout();
  ConvPlan::Setup& s = p.setup(check, L);
  const Staged xs = Staged::input(*this, check, x, x.layout(), p.x_dims, dt, L);
  const Staged dys = Staged::input(*this, check, dy, dy.layout(), p.y_dims, dt, L);
  Staged dws = Staged::output(*this, check, dw, Layout::row_major, p.w_dims, dt, L);
  const float one = 1.0f;
  // cuDNN accumulates (beta = 1) only into the caller's own dw; scratch is overwritten and
  // finish() does the += while converting back.
  const float beta = dws.direct() && acc == Accumulate::yes ? 1.0f : 0.0f;
  p.run(check, cudnn(), s, L, ConvDirection::backward_filter,
        [&](const AlgoChoice& a) {
          const Tensor scratch = workspace_for(*this, a);
          return cudnnConvolutionBackwardFilter(cudnn(), &one, s.x.get(), xs.data(), s.y.get(), dys.data(),
                                                s.conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                                data_or_null(scratch), a.workspace_bytes, &beta, s.w.get(),
                                                dws.data());
        },
        [&](const AlgoChoice& a) {
          return fmt::format("cudnnConvolutionBackwardFilter (algo {}, {} workspace bytes) "
                             "for {} with dw {}, dy {}, x {} in {}",
                             a.algo, a.workspace_bytes, describe(p.desc), dw.describe(),
                             dy.describe(), x.describe(), layout_word(L));
        });
  dws.finish(acc);
}

}  // namespace kiln::cuda
