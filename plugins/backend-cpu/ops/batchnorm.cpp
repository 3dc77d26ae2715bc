// Batch normalisation (training forward, inference forward, backward) through oneDNN.
//
// Decisions: statistics and gamma/beta are always f32 (C). Who computes depends on the layout
// and dtype the plan is called with (all data operands of one call share one layout):
// channels-last (nhwc, what layers use) runs the loops of batchnorm_nhwc.cpp in any float dtype
// (f16 and bf16 read into f32 lanes); row-major NCHW f32 runs oneDNN's `ncsp` kernels, and NCHW
// bf16/f16 the loops of batchnorm_loops.cpp (oneDNN 2.6 has no JIT NCHW batch-norm and its
// fallback is 3-4x slower in bf16: 44 ms forward + backward at 8x256x56x56 on 2 threads, against
// 12 ms in f32). oneDNN's own nhwc kernels are fast (3.3-3.7 ms there) but lose accuracy on
// narrow channels (batchnorm_nhwc.cpp says how much). oneDNN reports the biased batch variance: the training forward writes the
// mean straight into save_mean, keeps the variance in plan scratch, and derives save_invstd =
// 1/sqrt(var + eps) and the running-stat update (PyTorch: running = (1 - m) running + m batch,
// with the UNBIASED variance var * n/(n-1), n = N*H*W). The backward takes the saved invstd, so
// it turns it back into var = 1/invstd^2 - eps (relative error ~1e-6 of var in f32) and adds the
// dgamma/dbeta computed into plan scratch into the parameter gradients (they accumulate, ops.hpp).
#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "ops/batchnorm_loops.hpp"
#include "ops/dnnl_edge.hpp"
#include "ops/onednn_compat.hpp"
#include "ops/plans.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

using flags = dnnl::normalization_flags;

/// Who computes: oneDNN's primitives (NCHW f32), batchnorm_loops.cpp (NCHW bf16/f16) or
/// batchnorm_nhwc.cpp (channels-last).
enum class BnKernels : std::uint8_t { onednn, loops, nhwc_loops };

float* floats(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }

/// The primitives and edges for one (layout, dtype) of the data; a plan builds one on first use
/// and rebuilds it only if a call brings another layout or dtype.
struct BnVariant {
  Layout layout;
  DType dtype;
  BnKernels kernels;
  dnnl::batch_normalization_forward train, infer;
  dnnl::batch_normalization_backward back;
  Edge x, y, dx, dy;  // caller's data <-> what the primitive reads/writes
  std::unordered_map<int, dnnl::memory> train_args, infer_args, back_args;
};

class BatchNormPlan final : public OpPlan {
 public:
  BatchNormPlan(const BatchNormDesc& d, const dnnl::engine& engine, std::shared_ptr<EdgeScratch> scratch)
      : desc(d), engine_(engine), scratch_(std::move(scratch)) {
    const auto stat = plain_desc({d.c}, DType::f32);
    for (dnnl::memory* m : {&mean, &scale, &shift, &running_var}) *m = dnnl::memory(stat, engine, nullptr);
    for (dnnl::memory* m : {&variance, &dscale, &dshift, &zero_shift}) *m = dnnl::memory(stat, engine);
    std::fill_n(floats(zero_shift), d.c, 0.0f);
  }

  /// The variant for data of `layout` and `dtype` (built, or rebuilt, on first use).
  BnVariant& variant(Layout layout, DType dtype) {
    if (variant_ && variant_->layout == layout && variant_->dtype == dtype) return *variant_;
    const BatchNormDesc& d = desc;
    const dnnl::memory::dims data_dims{d.n, d.c, d.h, d.w};
    const auto user = user_desc(data_dims, dtype, layout);
    const BnKernels kernels = layout == Layout::nhwc  ? BnKernels::nhwc_loops
                              : dtype == DType::f32 ? BnKernels::onednn
                                                    : BnKernels::loops;
    variant_.emplace(BnVariant{layout, dtype, kernels, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}});
    BnVariant& v = *variant_;
    if (kernels != BnKernels::onednn) return v;
    const auto inner = user;  // NCHW f32: the primitive reads and writes the caller's memory
    const auto affine = flags::use_scale | flags::use_shift;
    const auto train_pd =
        onednn::batch_normalization_forward(engine_, dnnl::prop_kind::forward_training, inner, d.eps, affine);
    v.train = dnnl::batch_normalization_forward(train_pd);
    v.infer = dnnl::batch_normalization_forward(onednn::batch_normalization_forward(
        engine_, dnnl::prop_kind::forward_inference, inner, d.eps, affine | flags::use_global_stats));
    v.back = dnnl::batch_normalization_backward(
        onednn::batch_normalization_backward(engine_, inner, d.eps, affine, train_pd));
    v.x = Edge(engine_, user, inner, scratch_, 0);
    v.y = Edge(engine_, user, inner, scratch_, 1);
    v.dx = Edge(engine_, user, inner, scratch_, 2);
    v.dy = Edge(engine_, user, inner, scratch_, 3);
    v.train_args = {{DNNL_ARG_SRC, v.x.inner()},  {DNNL_ARG_DST, v.y.inner()},
                    {DNNL_ARG_MEAN, mean},        {DNNL_ARG_VARIANCE, variance},
                    {DNNL_ARG_SCALE, scale},      {DNNL_ARG_SHIFT, shift}};
    v.infer_args = {{DNNL_ARG_SRC, v.x.inner()},  {DNNL_ARG_DST, v.y.inner()},
                    {DNNL_ARG_MEAN, mean},        {DNNL_ARG_VARIANCE, running_var},
                    {DNNL_ARG_SCALE, scale},      {DNNL_ARG_SHIFT, shift}};
    v.back_args = {{DNNL_ARG_SRC, v.x.inner()},      {DNNL_ARG_DIFF_DST, v.dy.inner()},
                   {DNNL_ARG_MEAN, mean},            {DNNL_ARG_VARIANCE, variance},
                   {DNNL_ARG_SCALE, scale},          {DNNL_ARG_DIFF_SRC, v.dx.inner()},
                   {DNNL_ARG_DIFF_SCALE, dscale},    {DNNL_ARG_DIFF_SHIFT, dshift}};
    if (onednn::kBatchNormBackwardTakesShift) v.back_args.emplace(DNNL_ARG_SHIFT, zero_shift);
    return v;
  }

  const BatchNormDesc desc;
  // Caller statistics (data handle swapped per call) and plan-owned scratch (variance, dscale,
  // dshift: C floats each, allocated once and reused every call).
  dnnl::memory mean, scale, shift, running_var;
  dnnl::memory variance, dscale, dshift;
  // oneDNN 2.6 refuses to execute the backward without a shift argument although the gradient
  // does not depend on it (the backward signature has no beta): a zero vector stands in. 3.x
  // refuses it (onednn::kBatchNormBackwardTakesShift).
  dnnl::memory zero_shift;

 private:
  dnnl::engine engine_;
  std::shared_ptr<EdgeScratch> scratch_;
  std::optional<BnVariant> variant_;
};

using sdk::describe;  // the shared wording (kiln/sdk/op_descs.hpp)

BnVariant& variant_of(const OpCheck& check, BatchNormPlan& p, const Tensor& x) {
  try {
    return p.variant(x.layout(), x.dtype());
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN cannot build {} for x {}: {}", describe(p.desc), x.describe(), e.what()));
  }
}

}  // namespace

std::shared_ptr<OpPlan> CpuBackend::plan_batchnorm(const BatchNormDesc& d) {
  // The op table (op_table.hpp) decides which dtypes get a plan; anything else is the base refusal.
  if (!supports(Op::batchnorm_train_forward, d.dtype)) unsupported(Op::batchnorm_train_forward, d.dtype);
  const OpCheck check(Op::batchnorm_train_forward);
  sdk::check_batchnorm_desc(check, d);
  try {
    return std::make_shared<BatchNormPlan>(d, engine_, edge_scratch_);
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN cannot plan {}: {}", describe(d), e.what()));
  }
}

void CpuBackend::batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean,
                                         const Tensor& save_invstd, const Tensor& x,
                                         const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var) {
  const OpCheck check(Op::batchnorm_train_forward);
  BatchNormPlan& p = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm");
  const BatchNormDesc& d = p.desc;
  sdk::check_batchnorm_train(check, d, sdk::MixedLayouts::refused, y, save_mean, save_invstd, x, gamma, beta,
                             running_mean, running_var);
  use_our_threads();
  BnVariant& v = variant_of(check, p, x);
  if (v.kernels == BnKernels::loops) {
    bn_loops_train_forward(d, y, save_mean.data_as<float>(), floats(p.variance), x,
                           gamma.data_as<float>(), beta.data_as<float>());
  } else if (v.kernels == BnKernels::nhwc_loops) {
    bn_nhwc_train_forward(d, y, save_mean.data_as<float>(), floats(p.variance), x,
                          gamma.data_as<float>(), beta.data_as<float>());
  } else {
    try {
      v.x.bind(x.data());
      v.y.bind(y.data());
      p.mean.set_data_handle(save_mean.data());
      p.scale.set_data_handle(gamma.data());
      p.shift.set_data_handle(beta.data());
      v.x.pull(stream_);
      v.train.execute(stream_, v.train_args);
      v.y.push(stream_);
      stream_.wait();
    } catch (const dnnl::error& e) {
      check.fail(fmt::format("oneDNN failed for {} with y {}, x {}: {}", describe(d), y.describe(),
                             x.describe(), e.what()));
    }
  }
  const float* mean = save_mean.data_as<float>();
  const float* var = floats(p.variance);
  float* invstd = save_invstd.data_as<float>();
  float* rm = running_mean.data_as<float>();
  float* rv = running_var.data_as<float>();
  const std::int64_t count = d.n * d.h * d.w;  // >= 2, checked above
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  const float m = d.momentum;
  for (std::int64_t c = 0; c < d.c; ++c) {
    invstd[c] = 1.0f / std::sqrt(var[c] + d.eps);
    rm[c] = (1.0f - m) * rm[c] + m * mean[c];
    rv[c] = (1.0f - m) * rv[c] + m * static_cast<float>(var[c] * unbias);
  }
}

void CpuBackend::batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x,
                                         const Tensor& gamma, const Tensor& beta,
                                         const Tensor& running_mean, const Tensor& running_var) {
  const OpCheck check(Op::batchnorm_infer_forward);
  BatchNormPlan& p = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm");
  sdk::check_batchnorm_infer(check, p.desc, sdk::MixedLayouts::refused, y, x, gamma, beta, running_mean,
                             running_var);
  use_our_threads();
  BnVariant& v = variant_of(check, p, x);
  if (v.kernels == BnKernels::loops) {
    bn_loops_infer_forward(p.desc, y, x, gamma.data_as<float>(), beta.data_as<float>(),
                           running_mean.data_as<float>(), running_var.data_as<float>());
    return;
  }
  if (v.kernels == BnKernels::nhwc_loops) {
    bn_nhwc_infer_forward(p.desc, y, x, gamma.data_as<float>(), beta.data_as<float>(),
                          running_mean.data_as<float>(), running_var.data_as<float>());
    return;
  }
  try {
    v.x.bind(x.data());
    v.y.bind(y.data());
    p.mean.set_data_handle(running_mean.data());
    p.running_var.set_data_handle(running_var.data());
    p.scale.set_data_handle(gamma.data());
    p.shift.set_data_handle(beta.data());
    v.x.pull(stream_);
    v.infer.execute(stream_, v.infer_args);
    v.y.push(stream_);
    stream_.wait();
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN failed for {} with y {}, x {}: {}", describe(p.desc),
                           y.describe(), x.describe(), e.what()));
  }
}

void CpuBackend::batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma,
                                    const Tensor& dbeta, const Tensor& dy, const Tensor& x,
                                    const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_invstd) {
  const OpCheck check(Op::batchnorm_backward);
  BatchNormPlan& p = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm");
  const BatchNormDesc& d = p.desc;
  sdk::check_batchnorm_backward(check, d, sdk::MixedLayouts::refused, dx, dgamma, dbeta, dy, x, gamma,
                                save_mean, save_invstd);
  const float* invstd = save_invstd.data_as<float>();
  float* var = floats(p.variance);
  for (std::int64_t c = 0; c < d.c; ++c) var[c] = 1.0f / (invstd[c] * invstd[c]) - d.eps;
  use_our_threads();
  BnVariant& v = variant_of(check, p, x);
  if (v.kernels == BnKernels::loops) {
    bn_loops_backward(d, dx, floats(p.dscale), floats(p.dshift), dy, x, gamma.data_as<float>(),
                      save_mean.data_as<float>(), invstd);
  } else if (v.kernels == BnKernels::nhwc_loops) {
    bn_nhwc_backward(d, dx, floats(p.dscale), floats(p.dshift), dy, x, gamma.data_as<float>(),
                     save_mean.data_as<float>(), invstd);
  } else {
    try {
      v.x.bind(x.data());
      v.dy.bind(dy.data());
      v.dx.bind(dx.data());
      p.mean.set_data_handle(save_mean.data());
      p.scale.set_data_handle(gamma.data());
      v.x.pull(stream_);
      v.dy.pull(stream_);
      v.back.execute(stream_, v.back_args);
      v.dx.push(stream_);
      stream_.wait();
    } catch (const dnnl::error& e) {
      check.fail(fmt::format("oneDNN failed for {} with dx {}, dy {}, x {}: {}", describe(d),
                             dx.describe(), dy.describe(), x.describe(), e.what()));
    }
  }
  float* dg = dgamma.data_as<float>();
  float* db = dbeta.data_as<float>();
  const float* sg = floats(p.dscale);
  const float* sb = floats(p.dshift);
  for (std::int64_t c = 0; c < d.c; ++c) {
    dg[c] += sg[c];
    db[c] += sb[c];
  }
}

// The synchronised batch-norm ops run plain loops in either layout (batchnorm_sync_loops.cpp).
void CpuBackend::batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) {
  const OpCheck check(Op::batchnorm_stats);
  BatchNormPlan& p = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm");
  sdk::check_batchnorm_stats(check, p.desc, mean, var, x);
  bn_sync_stats(p.desc, mean.data_as<float>(), var.data_as<float>(), x);
}

void CpuBackend::batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat,
                                           const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                                           const Tensor& save_invstd) {
  const OpCheck check(Op::batchnorm_backward_reduce);
  BatchNormPlan& p = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm");
  sdk::check_batchnorm_backward_reduce(check, p.desc, sum_dy, sum_dy_xhat, dy, x, save_mean, save_invstd);
  bn_sync_backward_reduce(p.desc, sum_dy.data_as<float>(), sum_dy_xhat.data_as<float>(), dy, x,
                          save_mean.data_as<float>(), save_invstd.data_as<float>());
}

void CpuBackend::batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                          const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                                          const Tensor& sum_dy, const Tensor& sum_dy_xhat, std::int64_t count) {
  const OpCheck check(Op::batchnorm_backward_elemt);
  BatchNormPlan& p = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm");
  sdk::check_batchnorm_backward_elemt(check, p.desc, dx, dy, x, gamma, save_mean, save_invstd, sum_dy,
                                      sum_dy_xhat, count);
  bn_sync_backward_elemt(p.desc, dx, dy, x, gamma.data_as<float>(), save_mean.data_as<float>(),
                         save_invstd.data_as<float>(), sum_dy.data_as<float>(), sum_dy_xhat.data_as<float>(), count);
}

}  // namespace kiln::cpu
