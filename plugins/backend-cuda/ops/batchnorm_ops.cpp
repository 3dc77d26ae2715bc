// Batch normalisation (training forward, inference forward, backward) through cuDNN's legacy
// batch-norm API (still in cuDNN 9).
//
// Decisions: statistics, gamma/beta and their gradients are f32 (C), cuDNN's derived descriptor
// type for f32/f16/bf16 data. Mapping onto the contract, exactly: cuDNN's running-stat update is
// running = (1 - factor) * running + factor * batch with the UNBIASED batch variance, i.e.
// PyTorch's momentum rule with factor = momentum; cuDNN's saved "inverse variance" is
// 1/sqrt(biased var + eps), which is the contract's save_invstd; the backward's param-diff blend
// (betaParamDiff = 1) makes dgamma/dbeta accumulate as the contract says. Mode
// (dnn/dnn_policy.hpp): SPATIAL_PERSISTENT (the fast NHWC kernels) for nhwc f16, SPATIAL for bf16
// until persistent has been seen to work there, and SPATIAL otherwise (and wherever cuDNN reports
// a not-supported status, any cuDNN 9 sub-code, for persistent). Data must be in the plan's dtype
// (as on the cpu backend); a y/dy/dx whose layout differs from x's is staged (dnn/staging.hpp).
#include <array>
#include <memory>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "dnn/cudnn_desc.hpp"
#include "dnn/dnn_check.hpp"
#include "dnn/dnn_policy.hpp"
#include "dnn/staging.hpp"

namespace kiln::cuda {
namespace {

class BatchNormPlan final : public OpPlan {
 public:
  explicit BatchNormPlan(const BatchNormDesc& d) : desc(d), dims{d.n, d.c, d.h, d.w} {}

  struct Setup {
    cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
    TensorDesc data, stats;
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

BatchNormPlan& bn_plan(const DnnCheck& check, OpPlan& plan) {
  auto* p = dynamic_cast<BatchNormPlan*>(&plan);
  if (p == nullptr) {
    check.fail("the plan passed was not made by the cuda backend's plan_batchnorm; pass the plan "
               "this layer got from plan_batchnorm for the same shapes");
  }
  return *p;
}

using sdk::describe;  // the shared wording (kiln/sdk/op_descs.hpp)

/// Runs `call(mode)`; when cuDNN has no persistent kernel for this shape (a NOT_SUPPORTED status
/// or sub-code, e.g. an odd channel count), the plan drops to SPATIAL for good and runs again. The saved statistics
/// mean the same in both modes, so a forward and a backward may differ in mode.
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
  const auto run = [&](cudnnBatchNormMode_t mode) {
    return cudnnBatchNormalizationForwardTraining(
        cudnn(), mode, &one, &zero, s.data.get(), x.data(), s.data.get(), ys.data(), s.stats.get(),
        gamma.data(), beta.data(), static_cast<double>(d.momentum), running_mean.data(),
        running_var.data(), static_cast<double>(d.eps), save_mean.data(), save_invstd.data());
  };
  check.cudnn(with_fallback(s, run),
              [&] {
                return fmt::format("cudnnBatchNormalizationForwardTraining ({}) for {} with y {}, "
                                   "x {} in {}",
                                   mode_name(s.mode), describe(d), y.describe(), x.describe(),
                                   layout_word(L));
              });
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
  const auto run = [&](cudnnBatchNormMode_t mode) {
    return cudnnBatchNormalizationBackward(
        cudnn(), mode, &one, &zero, &one, &one, s.data.get(), x.data(), s.data.get(), dys.data(),
        s.data.get(), dxs.data(), s.stats.get(), gamma.data(), dgamma.data(), dbeta.data(),
        static_cast<double>(d.eps), save_mean.data(), save_invstd.data());
  };
  check.cudnn(with_fallback(s, run),
              [&] {
                return fmt::format("cudnnBatchNormalizationBackward ({}) for {} with dx {}, dy {}, "
                                   "x {} in {}",
                                   mode_name(s.mode), describe(d), dx.describe(), dy.describe(),
                                   x.describe(), layout_word(L));
              });
  dxs.finish(Accumulate::no);
}

}  // namespace kiln::cuda
