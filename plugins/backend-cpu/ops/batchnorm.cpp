// Batch normalisation (training forward, inference forward, backward) through oneDNN.
//
// Decisions: data stays in the caller's NCHW layout (oneDNN's ncsp kernels; no reorders), f32 or
// bf16 per the plan; statistics and gamma/beta are always f32 (C). oneDNN reports the biased
// batch variance: the training forward writes the mean straight into save_mean, keeps the
// variance in plan scratch, and derives save_invstd = 1/sqrt(var + eps) and the running-stat
// update (PyTorch: running = (1 - m) running + m batch, with the UNBIASED variance var * n/(n-1),
// n = N*H*W). The backward takes the saved invstd, so it turns it back into var = 1/invstd^2 - eps
// (exact enough in f32: relative error ~1e-6 of var) and adds oneDNN's dgamma/dbeta, computed into
// plan scratch, into the parameter gradients (they accumulate, ops.hpp). bf16 data runs the plain
// loops of batchnorm_loops.cpp instead (oneDNN's NCHW bf16 batch-norm is 3-4x slower than its f32
// one); the statistics and gradient bookkeeping around them are the same.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "ops/batchnorm_loops.hpp"
#include "ops/dnnl_edge.hpp"
#include "ops/plans.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

using flags = dnnl::normalization_flags;

/// Who computes: oneDNN's primitives (f32) or batchnorm_loops.cpp (bf16).
enum class BnKernels : std::uint8_t { onednn, loops };

float* floats(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }

class BatchNormPlan final : public OpPlan {
 public:
  BatchNormPlan(const BatchNormDesc& d, const dnnl::engine& engine)
      : desc(d), kernels(d.dtype == DType::f32 ? BnKernels::onednn : BnKernels::loops) {
    const auto data = plain_desc({d.n, d.c, d.h, d.w}, d.dtype);
    const auto stat = plain_desc({d.c}, DType::f32);
    if (kernels == BnKernels::onednn) build_primitives(d, data, engine);
    for (dnnl::memory* m : {&x, &y, &dx, &dy}) *m = dnnl::memory(data, engine, nullptr);
    for (dnnl::memory* m : {&mean, &scale, &shift}) *m = dnnl::memory(stat, engine, nullptr);
    for (dnnl::memory* m : {&variance, &dscale, &dshift, &zero_shift}) *m = dnnl::memory(stat, engine);
    std::fill_n(floats(zero_shift), d.c, 0.0f);
    running_var = dnnl::memory(stat, engine, nullptr);
    train_args = {{DNNL_ARG_SRC, x},       {DNNL_ARG_DST, y},       {DNNL_ARG_MEAN, mean},
                  {DNNL_ARG_VARIANCE, variance}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift}};
    infer_args = {{DNNL_ARG_SRC, x},       {DNNL_ARG_DST, y},          {DNNL_ARG_MEAN, mean},
                  {DNNL_ARG_VARIANCE, running_var}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift}};
    back_args = {{DNNL_ARG_SRC, x},           {DNNL_ARG_DIFF_DST, dy},       {DNNL_ARG_MEAN, mean},
                 {DNNL_ARG_VARIANCE, variance}, {DNNL_ARG_SCALE, scale},    {DNNL_ARG_DIFF_SRC, dx},
                 {DNNL_ARG_SHIFT, zero_shift},
                 {DNNL_ARG_DIFF_SCALE, dscale}, {DNNL_ARG_DIFF_SHIFT, dshift}};
  }

  void build_primitives(const BatchNormDesc& d, const dnnl::memory::desc& data,
                        const dnnl::engine& engine) {
    const dnnl::batch_normalization_forward::desc train_desc(
        dnnl::prop_kind::forward_training, data, d.eps, flags::use_scale | flags::use_shift);
    const dnnl::batch_normalization_forward::primitive_desc train_pd(train_desc, engine);
    const dnnl::batch_normalization_forward::desc infer_desc(
        dnnl::prop_kind::forward_inference, data, d.eps,
        flags::use_scale | flags::use_shift | flags::use_global_stats);
    const dnnl::batch_normalization_backward::desc back_desc(
        dnnl::prop_kind::backward, data, data, d.eps, flags::use_scale | flags::use_shift);
    train = dnnl::batch_normalization_forward(train_pd);
    infer = dnnl::batch_normalization_forward(
        dnnl::batch_normalization_forward::primitive_desc(infer_desc, engine));
    back = dnnl::batch_normalization_backward(
        dnnl::batch_normalization_backward::primitive_desc(back_desc, engine, train_pd));
  }

  const BatchNormDesc desc;
  const BnKernels kernels;  // loops (bf16): the primitives below stay empty
  dnnl::batch_normalization_forward train, infer;
  dnnl::batch_normalization_backward back;
  // Caller memories (data handle swapped per call) and plan-owned scratch (variance, dscale,
  // dshift: C floats each, allocated above and reused every call).
  dnnl::memory x, y, dx, dy, mean, scale, shift, running_var;
  dnnl::memory variance, dscale, dshift;
  // oneDNN 2.6 refuses to execute the backward without a shift argument although the gradient
  // does not depend on it (the backward signature has no beta): a zero vector stands in.
  dnnl::memory zero_shift;
  // Built once: executing with a fresh std::unordered_map would allocate every call.
  std::unordered_map<int, dnnl::memory> train_args, infer_args, back_args;
};

std::string describe(const BatchNormDesc& d) {
  return fmt::format("batchnorm {} ({}, {}, {}, {}) eps {} momentum {}", dtype_name(d.dtype), d.n,
                     d.c, d.h, d.w, d.eps, d.momentum);
}

struct BnChecks {
  const OpCheck& check;
  const BatchNormDesc& d;
  void data(const char* name, const Tensor& t) const {
    check.usable(name, t).dtype(name, t, d.dtype).shape(name, t, {d.n, d.c, d.h, d.w});
  }
  void stat(const char* name, const Tensor& t) const {
    check.usable(name, t).dtype(name, t, DType::f32).shape(name, t, {d.c});
  }
};

}  // namespace

std::shared_ptr<OpPlan> CpuBackend::plan_batchnorm(const BatchNormDesc& d) {
  if (d.dtype != DType::f32 && d.dtype != DType::bf16) unsupported(Op::batchnorm_train_forward, d.dtype);
  const OpCheck check(Op::batchnorm_train_forward);
  if (d.n <= 0 || d.c <= 0 || d.h <= 0 || d.w <= 0 || !(d.eps > 0.0f) ||
      !(d.momentum >= 0.0f && d.momentum <= 1.0f)) {
    check.fail(fmt::format("{} needs positive sizes, eps > 0 and momentum in [0, 1]", describe(d)));
  }
  try {
    return std::make_shared<BatchNormPlan>(d, engine_);
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
  const BnChecks bn{check, d};
  bn.data("y", y);
  bn.data("x", x);
  bn.stat("save_mean", save_mean);
  bn.stat("save_invstd", save_invstd);
  bn.stat("gamma", gamma);
  bn.stat("beta", beta);
  bn.stat("running_mean", running_mean);
  bn.stat("running_var", running_var);
  const std::int64_t count = d.n * d.h * d.w;
  if (count < 2) {
    check.fail(fmt::format("{} has {} value per channel; training needs at least 2 (as PyTorch)",
                           describe(d), count));
  }
  use_our_threads();
  if (p.kernels == BnKernels::loops) {
    bn_loops_train_forward(d, y, save_mean.data_as<float>(), floats(p.variance), x,
                           gamma.data_as<float>(), beta.data_as<float>());
  } else {
    try {
      p.x.set_data_handle(x.data());
      p.y.set_data_handle(y.data());
      p.mean.set_data_handle(save_mean.data());
      p.scale.set_data_handle(gamma.data());
      p.shift.set_data_handle(beta.data());
      p.train.execute(stream_, p.train_args);
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
  const BnChecks bn{check, p.desc};
  bn.data("y", y);
  bn.data("x", x);
  bn.stat("gamma", gamma);
  bn.stat("beta", beta);
  bn.stat("running_mean", running_mean);
  bn.stat("running_var", running_var);
  use_our_threads();
  if (p.kernels == BnKernels::loops) {
    bn_loops_infer_forward(p.desc, y, x, gamma.data_as<float>(), beta.data_as<float>(),
                           running_mean.data_as<float>(), running_var.data_as<float>());
    return;
  }
  try {
    p.x.set_data_handle(x.data());
    p.y.set_data_handle(y.data());
    p.mean.set_data_handle(running_mean.data());
    p.running_var.set_data_handle(running_var.data());
    p.scale.set_data_handle(gamma.data());
    p.shift.set_data_handle(beta.data());
    p.infer.execute(stream_, p.infer_args);
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
  const BnChecks bn{check, d};
  bn.data("dx", dx);
  bn.data("dy", dy);
  bn.data("x", x);
  bn.stat("dgamma", dgamma);
  bn.stat("dbeta", dbeta);
  bn.stat("gamma", gamma);
  bn.stat("save_mean", save_mean);
  bn.stat("save_invstd", save_invstd);
  const float* invstd = save_invstd.data_as<float>();
  float* var = floats(p.variance);
  for (std::int64_t c = 0; c < d.c; ++c) var[c] = 1.0f / (invstd[c] * invstd[c]) - d.eps;
  use_our_threads();
  if (p.kernels == BnKernels::loops) {
    bn_loops_backward(d, dx, floats(p.dscale), floats(p.dshift), dy, x, gamma.data_as<float>(),
                      save_mean.data_as<float>(), invstd);
  } else {
    try {
      p.x.set_data_handle(x.data());
      p.dy.set_data_handle(dy.data());
      p.dx.set_data_handle(dx.data());
      p.mean.set_data_handle(save_mean.data());
      p.scale.set_data_handle(gamma.data());
      p.back.execute(stream_, p.back_args);
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

}  // namespace kiln::cpu
