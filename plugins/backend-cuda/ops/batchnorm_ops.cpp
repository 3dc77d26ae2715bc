// Batch normalisation (training forward, inference forward, backward) through cuDNN's batch-norm
// API. Training forward and backward use the Ex calls (cudnnBatchNormalizationForwardTrainingEx,
// cudnnBatchNormalizationBackwardEx) with a workspace and a reserve space: only they reach cuDNN's
// fast NHWC (semi-)persistent kernels, which is what PyTorch uses for channels_last f16/bf16
// training; the non-Ex calls run the generic kernels whatever the mode says. Inference keeps the
// plain call (there is no Ex inference variant; SPATIAL there).
//
// Decisions: statistics, gamma/beta and their gradients are f32 (C), cuDNN's derived descriptor
// type for f32/f16/bf16 data. Mapping onto the contract, exactly: cuDNN's running-stat update is
// running = (1 - factor) * running + factor * batch with the UNBIASED batch variance, i.e.
// PyTorch's momentum rule with factor = momentum; cuDNN's saved "inverse variance" is
// 1/sqrt(biased var + eps), which is the contract's save_invstd; the backward's param-diff blend
// (betaParamDiff = 1) makes dgamma/dbeta accumulate as the contract says. bnOps is plain BN (no
// fused add or activation: z, the activation and the backward's y/dz are null). Mode
// (dnn/dnn_policy.hpp): SPATIAL_PERSISTENT (the fast NHWC kernels) for nhwc data of every dtype, and
// SPATIAL otherwise (and wherever cuDNN reports a not-supported status, any cuDNN 9 sub-code,
// for persistent: from the size queries or the call). Workspace sizes are queried once per plan, layout and mode; the workspace comes from the
// caching allocator per call, the reserve space is kept in the plan (the contract has no slot for
// it) and paired with its forward by dnn/batchnorm_reserve.hpp. Data must be in the plan's dtype
// (as on the cpu backend); a y/dy/dx whose layout differs from x's is staged (dnn/staging.hpp).
#include <array>
#include <cstddef>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "ops/batchnorm_plan.hpp"
#include "dnn/batchnorm_reserve.hpp"
#include "dnn/cudnn_desc.hpp"
#include "dnn/dnn_check.hpp"
#include "dnn/dnn_policy.hpp"
#include "dnn/staging.hpp"

namespace kiln::cuda {
namespace {

class BatchNormPlan final : public OpPlan {
 public:
  explicit BatchNormPlan(const BatchNormDesc& d) : desc(d), dims{d.n, d.c, d.h, d.w} {}

  /// cuDNN's Ex scratch sizes for one mode (bytes).
  struct ExSizes {
    std::size_t forward_workspace = 0;
    std::size_t backward_workspace = 0;
    std::size_t reserve = 0;
  };

  struct Setup {
    cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
    TensorDesc data, stats;
    /// The Ex sizes per mode ([0] spatial, [1] persistent), queried on first use.
    std::array<std::optional<ExSizes>, 2> sizes;
    /// The reserve space the training forward writes and its backward reads, and its ledger.
    Tensor reserve;
    BatchNormReserve reserve_ledger;

    /// The Ex sizes in `m`, queried once; a failed query's status is returned (a not-supported
    /// one makes the caller fall back to SPATIAL). The queries get the data descriptor for z/y
    /// (plain BN ignores them; a valid descriptor is the safe choice), the calls get null.
    cudnnStatus_t ex_sizes(cudnnHandle_t handle, cudnnBatchNormMode_t m, ExSizes& out) {
      auto& slot = sizes[m == CUDNN_BATCHNORM_SPATIAL_PERSISTENT ? 1 : 0];
      if (!slot) {
        ExSizes q;
        const cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN;
        cudnnStatus_t st = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
            handle, m, ops, data.get(), /*zDesc (unused by plain BN)=*/data.get(), data.get(), stats.get(),
            /*activation=*/nullptr, &q.forward_workspace);
        if (st != CUDNN_STATUS_SUCCESS) return st;
        st = cudnnGetBatchNormalizationBackwardExWorkspaceSize(
            handle, m, ops, data.get(), /*yDesc (unused by plain BN)=*/data.get(), data.get(), /*dzDesc=*/nullptr,
            data.get(), stats.get(), /*activation=*/nullptr, &q.backward_workspace);
        if (st != CUDNN_STATUS_SUCCESS) return st;
        st = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, m, ops, /*activation=*/nullptr,
                                                                  data.get(), &q.reserve);
        if (st != CUDNN_STATUS_SUCCESS) return st;
        slot = q;
      }
      out = *slot;
      return CUDNN_STATUS_SUCCESS;
    }
  };

  Setup& setup(const DnnCheck& check, Layout layout) {
    auto& slot = setups_[layout == Layout::nhwc ? 1 : 0];
    if (slot) return *slot;
    auto s = std::make_unique<Setup>();
    s->mode = batchnorm_start_mode(desc.dtype, layout);
    s->data.set(check, dims, desc.dtype, layout);
    check.cudnn(cudnnDeriveBNTensorDescriptor(s->stats.get(), s->data.get(), s->mode), [&] {
      return fmt::format("cudnnDeriveBNTensorDescriptor for {} ({}, {}, {}, {}) {}",
                         dtype_name(desc.dtype), dims.n, dims.c, dims.h, dims.w, layout_word(layout));
    });
    slot = std::move(s);
    return *slot;
  }

  const BatchNormDesc desc;
  const Dims4 dims;

 private:
  std::array<std::unique_ptr<Setup>, 2> setups_;
};

BatchNormPlan& bn_plan(const sdk::OpCheck& check, OpPlan& plan) {
  auto* p = dynamic_cast<BatchNormPlan*>(&plan);
  if (p == nullptr) {
    check.fail("the plan passed was not made by the cuda backend's plan_batchnorm; pass the plan "
               "this layer got from plan_batchnorm for the same shapes");
  }
  return *p;
}

using sdk::describe;  // the shared wording (kiln/sdk/op_descs.hpp)

/// Runs `call(mode)`; when cuDNN has no persistent kernel for this shape (a NOT_SUPPORTED status
/// or sub-code, e.g. an odd channel count), the plan drops to SPATIAL for good and runs again. The
/// saved statistics mean the same in both modes; a reserve space does not (the ledger refuses a
/// backward whose mode needs another reserve than its forward wrote).
template <class Call>
cudnnStatus_t with_fallback(BatchNormPlan::Setup& s, Call&& call) {
  cudnnStatus_t status = call(s.mode);
  if (batchnorm_falls_back(status, s.mode)) {
    s.mode = CUDNN_BATCHNORM_SPATIAL;
    status = call(s.mode);
  }
  return status;
}

const char* mode_name(cudnnBatchNormMode_t m) {
  return m == CUDNN_BATCHNORM_SPATIAL_PERSISTENT ? "spatial-persistent" : "spatial";
}

}  // namespace

const BatchNormDesc& batchnorm_plan_desc(const sdk::OpCheck& check, OpPlan& plan) { return bn_plan(check, plan).desc; }

std::shared_ptr<OpPlan> CudaBackend::plan_batchnorm(const BatchNormDesc& d) {
  // The op table (op_table.hpp) decides which dtypes get a plan; anything else is the base refusal.
  if (!supports(Op::batchnorm_train_forward, d.dtype)) unsupported(Op::batchnorm_train_forward, d.dtype);
  const DnnCheck check(Op::batchnorm_train_forward);
  sdk::check_batchnorm_desc(check, d);
  auto plan = std::make_shared<BatchNormPlan>(d);
  plan->setup(check, activation_layout(d.dtype));
  return plan;
}

void CudaBackend::batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean,
                                          const Tensor& save_invstd, const Tensor& x,
                                          const Tensor& gamma, const Tensor& beta,
                                          const Tensor& running_mean, const Tensor& running_var) {
  const DnnCheck check(Op::batchnorm_train_forward);
  BatchNormPlan& p = bn_plan(check, plan);
  const BatchNormDesc& d = p.desc;
  sdk::check_batchnorm_train(check, d, sdk::MixedLayouts::accepted, y, save_mean, save_invstd, x, gamma, beta,
                             running_mean, running_var);
  const Layout L = x.layout();
  BatchNormPlan::Setup& s = p.setup(check, L);
  Staged ys = Staged::output(*this, check, y, y.layout(), p.dims, d.dtype, L);
  const float one = 1.0f, zero = 0.0f;
  BatchNormPlan::ExSizes sz;
  const auto run = [&](cudnnBatchNormMode_t mode) {
    if (const cudnnStatus_t q = s.ex_sizes(cudnn(), mode, sz); q != CUDNN_STATUS_SUCCESS) return q;
    s.reserve_ledger.set_required(sz.reserve);
    if (s.reserve_ledger.must_grow(s.reserve.defined() ? s.reserve.bytes() : 0)) {
      s.reserve = allocate({static_cast<std::int64_t>(sz.reserve)}, DType::u8, MemoryKind::device);
    }
    const Tensor scratch = sz.forward_workspace > 0 ? workspace(sz.forward_workspace) : Tensor();
    return cudnnBatchNormalizationForwardTrainingEx(
        cudnn(), mode, CUDNN_BATCHNORM_OPS_BN, &one, &zero, s.data.get(), x.data(), /*zDesc=*/nullptr,
        /*zData=*/nullptr, s.data.get(), ys.data(), s.stats.get(), gamma.data(), beta.data(),
        static_cast<double>(d.momentum), running_mean.data(), running_var.data(), static_cast<double>(d.eps),
        save_mean.data(), save_invstd.data(), /*activationDesc=*/nullptr,
        scratch.defined() ? scratch.data() : nullptr, sz.forward_workspace,
        sz.reserve > 0 ? s.reserve.data() : nullptr, sz.reserve);
  };
  check.cudnn(with_fallback(s, run),
              [&] {
                return fmt::format("cudnnBatchNormalizationForwardTrainingEx ({}, {} workspace bytes, {} reserve "
                                   "bytes) for {} with y {}, x {} in {}",
                                   mode_name(s.mode), sz.forward_workspace, sz.reserve, describe(d), y.describe(),
                                   x.describe(), layout_word(L));
              });
  s.reserve_ledger.forward_wrote(x.data());
  count_batchnorm_mode(s.mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
  ys.finish(Accumulate::no);
}

void CudaBackend::batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x,
                                          const Tensor& gamma, const Tensor& beta,
                                          const Tensor& running_mean, const Tensor& running_var) {
  const DnnCheck check(Op::batchnorm_infer_forward);
  BatchNormPlan& p = bn_plan(check, plan);
  const BatchNormDesc& d = p.desc;
  sdk::check_batchnorm_infer(check, d, sdk::MixedLayouts::accepted, y, x, gamma, beta, running_mean, running_var);
  const Layout L = x.layout();
  BatchNormPlan::Setup& s = p.setup(check, L);
  Staged ys = Staged::output(*this, check, y, y.layout(), p.dims, d.dtype, L);
  const float one = 1.0f, zero = 0.0f;
  // The inference kernels take SPATIAL (PERSISTENT is a training-kernel choice).
  check.cudnn(cudnnBatchNormalizationForwardInference(
                  cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, s.data.get(), x.data(),
                  s.data.get(), ys.data(), s.stats.get(), gamma.data(), beta.data(),
                  running_mean.data(), running_var.data(), static_cast<double>(d.eps)),
              [&] {
                return fmt::format("cudnnBatchNormalizationForwardInference for {} with y {}, x {} "
                                   "in {}",
                                   describe(d), y.describe(), x.describe(), layout_word(L));
              });
  ys.finish(Accumulate::no);
}

void CudaBackend::batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma,
                                     const Tensor& dbeta, const Tensor& dy, const Tensor& x,
                                     const Tensor& gamma, const Tensor& save_mean,
                                     const Tensor& save_invstd) {
  const DnnCheck check(Op::batchnorm_backward);
  BatchNormPlan& p = bn_plan(check, plan);
  const BatchNormDesc& d = p.desc;
  sdk::check_batchnorm_backward(check, d, sdk::MixedLayouts::accepted, dx, dgamma, dbeta, dy, x, gamma,
                                save_mean, save_invstd);
  const Layout L = x.layout();
  BatchNormPlan::Setup& s = p.setup(check, L);
  const Staged dys = Staged::input(*this, check, dy, dy.layout(), p.dims, d.dtype, L);
  Staged dxs = Staged::output(*this, check, dx, dx.layout(), p.dims, d.dtype, L);
  // alphaDataDiff = 1, betaDataDiff = 0: dx is overwritten; alphaParamDiff = 1,
  // betaParamDiff = 1: dgamma/dbeta accumulate.
  const float one = 1.0f, zero = 0.0f;
  BatchNormPlan::ExSizes sz;
  const auto run = [&](cudnnBatchNormMode_t mode) {
    if (const cudnnStatus_t q = s.ex_sizes(cudnn(), mode, sz); q != CUDNN_STATUS_SUCCESS) return q;
    if (const auto problem = s.reserve_ledger.backward_problem(x.data(), sz.reserve)) check.fail(*problem);
    const Tensor scratch = sz.backward_workspace > 0 ? workspace(sz.backward_workspace) : Tensor();
    return cudnnBatchNormalizationBackwardEx(
        cudnn(), mode, CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one, &one, s.data.get(), x.data(),
        /*yDesc=*/nullptr, /*yData=*/nullptr, s.data.get(), dys.data(), /*dzDesc=*/nullptr, /*dzData=*/nullptr,
        s.data.get(), dxs.data(), s.stats.get(), gamma.data(), /*bnBiasData=*/nullptr, dgamma.data(),
        dbeta.data(), static_cast<double>(d.eps), save_mean.data(), save_invstd.data(),
        /*activationDesc=*/nullptr, scratch.defined() ? scratch.data() : nullptr, sz.backward_workspace,
        sz.reserve > 0 ? s.reserve.data() : nullptr, sz.reserve);
  };
  check.cudnn(with_fallback(s, run),
              [&] {
                return fmt::format("cudnnBatchNormalizationBackwardEx ({}, {} workspace bytes, {} reserve bytes) "
                                   "for {} with dx {}, dy {}, x {} in {}",
                                   mode_name(s.mode), sz.backward_workspace, sz.reserve, describe(d), dx.describe(),
                                   dy.describe(), x.describe(), layout_word(L));
              });
  count_batchnorm_mode(s.mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
  dxs.finish(Accumulate::no);
}

}  // namespace kiln::cuda
