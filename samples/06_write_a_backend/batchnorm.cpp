// Batch normalisation over (N, H, W) per channel c, training and inference forward, backward,
// and the three split ops of synchronised batch-norm.
//
//   mean_c   = sum x / count                        count = N * H * W values per channel
//   var_c    = sum (x - mean_c)^2 / count           biased: what normalises (two passes)
//   invstd_c = 1 / sqrt(var_c + eps)
//   xhat     = (x - mean_c) * invstd_c,   y = gamma_c * xhat + beta_c
// Training forward also updates the running statistics, PyTorch's rule with the UNBIASED
// variance: running = (1 - momentum) * running + momentum * batch value.
// Backward, with the per-channel sums  sum_dy = sum dy  and  sum_dy_xhat = sum dy * xhat:
//   dx = gamma_c * invstd_c * (dy - sum_dy / count - xhat * sum_dy_xhat / count)
//   dgamma_c += sum_dy_xhat,  dbeta_c += sum_dy   (parameter gradients accumulate)
// Synchronised batch-norm cuts exactly there: batchnorm_stats gives one rank's mean and biased
// variance, batchnorm_backward_reduce its two sums, and after the caller has added them over the
// ranks, batchnorm_backward_elemt applies the dx formula with the global sums and count. The
// helpers below are those pieces, and each op is a few calls of them: batchnorm_backward is
// backward_reduce followed by backward_elemt on a world of one rank.
//
// Statistics, gamma, beta and their gradients are f32 (C); x, y, dx, dy are 4-D in either layout
// (the shared checks want one layout per call), read through Image.
#include <cmath>
#include <vector>

#include "image.hpp"
#include "naive_backend.hpp"

namespace kiln::naive {
namespace {

/// The plan keeps the checked descriptor (a fast backend keeps its primitives here too).
struct BatchNormPlan final : OpPlan {
  explicit BatchNormPlan(const BatchNormDesc& d) : desc(d) {}
  BatchNormDesc desc;
};

/// Calls f(n, h, w) for every value of one channel.
template <class F>
void for_each_value(const Image& t, F&& f) {
  for (std::int64_t n = 0; n < t.n(); ++n) {
    for (std::int64_t h = 0; h < t.h(); ++h) {
      for (std::int64_t w = 0; w < t.w(); ++w) f(n, h, w);
    }
  }
}

/// The mean and biased variance of channel c of x, by two passes (the one-pass E[x^2] - E[x]^2
/// loses every digit when the mean is large against the spread).
struct MeanVar {
  double mean = 0.0, var = 0.0;
};
MeanVar channel_mean_var(const Image& x, std::int64_t c) {
  const double count = static_cast<double>(x.n() * x.h() * x.w());
  MeanVar out;
  for_each_value(x, [&](auto n, auto h, auto w) { out.mean += x(n, c, h, w); });
  out.mean /= count;
  for_each_value(x, [&](auto n, auto h, auto w) {
    const double e = x(n, c, h, w) - out.mean;
    out.var += e * e;
  });
  out.var /= count;
  return out;
}

/// sum dy and sum dy * xhat over channel c, xhat from the given statistics.
struct BackwardSums {
  double dy = 0.0, dy_xhat = 0.0;
};
BackwardSums channel_backward_sums(const Image& dy, const Image& x, std::int64_t c, double mean, double invstd) {
  BackwardSums out;
  for_each_value(x, [&](auto n, auto h, auto w) {
    out.dy += dy(n, c, h, w);
    out.dy_xhat += double{dy(n, c, h, w)} * (x(n, c, h, w) - mean) * invstd;
  });
  return out;
}

/// dx of channel c by the formula above; `count` is the number of values the sums were taken over
/// (all ranks' for synchronised batch-norm).
void channel_dx(const Image& dx, const Image& dy, const Image& x, std::int64_t c, double gamma, double mean,
                double invstd, const BackwardSums& sums, double count) {
  for_each_value(x, [&](auto n, auto h, auto w) {
    const double xhat = (x(n, c, h, w) - mean) * invstd;
    dx(n, c, h, w) =
        static_cast<float>(gamma * invstd * (dy(n, c, h, w) - sums.dy / count - xhat * sums.dy_xhat / count));
  });
}

}  // namespace

std::shared_ptr<OpPlan> NaiveBackend::plan_batchnorm(const BatchNormDesc& desc) {
  const OpCheck check(Op::batchnorm_train_forward);
  sdk::check_batchnorm_desc(check, desc);
  require_f32(Op::batchnorm_train_forward, desc.dtype);
  return std::make_shared<BatchNormPlan>(desc);
}

void NaiveBackend::batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean,
                                           const Tensor& save_invstd, const Tensor& x, const Tensor& gamma,
                                           const Tensor& beta, const Tensor& running_mean,
                                           const Tensor& running_var) {
  const OpCheck check(Op::batchnorm_train_forward);
  const BatchNormDesc& d = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm").desc;
  sdk::check_batchnorm_train(check, d, sdk::MixedLayouts::refused, y, save_mean, save_invstd, x, gamma, beta,
                             running_mean, running_var);  // also: at least 2 values per channel
  const Image in(x), out(y);
  const double count = static_cast<double>(d.n * d.h * d.w);
  const double momentum = d.momentum;
  for (std::int64_t c = 0; c < d.c; ++c) {
    // The statistics of channel c are taken before its y is written, so y may alias x.
    const MeanVar stats = channel_mean_var(in, c);
    const double invstd = 1.0 / std::sqrt(stats.var + double{d.eps});
    const double g = floats(gamma)[c], b = floats(beta)[c];
    for_each_value(in, [&](auto n, auto h, auto w) {
      out(n, c, h, w) = static_cast<float>(g * (in(n, c, h, w) - stats.mean) * invstd + b);
    });
    floats(save_mean)[c] = static_cast<float>(stats.mean);
    floats(save_invstd)[c] = static_cast<float>(invstd);
    const double unbiased_var = stats.var * count / (count - 1.0);
    float& rm = floats(running_mean)[c];
    float& rv = floats(running_var)[c];
    rm = static_cast<float>((1.0 - momentum) * rm + momentum * stats.mean);
    rv = static_cast<float>((1.0 - momentum) * rv + momentum * unbiased_var);
  }
}

void NaiveBackend::batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& gamma,
                                           const Tensor& beta, const Tensor& running_mean,
                                           const Tensor& running_var) {
  const OpCheck check(Op::batchnorm_infer_forward);
  const BatchNormDesc& d = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm").desc;
  sdk::check_batchnorm_infer(check, d, sdk::MixedLayouts::refused, y, x, gamma, beta, running_mean, running_var);
  // Normalises with the running statistics and leaves them as they are. Synchronised batch-norm
  // also comes here, with the global batch statistics in place of the running ones.
  const Image in(x), out(y);
  for (std::int64_t c = 0; c < d.c; ++c) {
    const double mean = floats(running_mean)[c];
    const double invstd = 1.0 / std::sqrt(double{floats(running_var)[c]} + double{d.eps});
    const double g = floats(gamma)[c], b = floats(beta)[c];
    for_each_value(in, [&](auto n, auto h, auto w) {
      out(n, c, h, w) = static_cast<float>(g * (in(n, c, h, w) - mean) * invstd + b);
    });
  }
}

void NaiveBackend::batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                                      const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_invstd) {
  const OpCheck check(Op::batchnorm_backward);
  const BatchNormDesc& d = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm").desc;
  sdk::check_batchnorm_backward(check, d, sdk::MixedLayouts::refused, dx, dgamma, dbeta, dy, x, gamma, save_mean,
                                save_invstd);
  const Image grad_in(dx), grad_out(dy), in(x);
  const double count = static_cast<double>(d.n * d.h * d.w);
  for (std::int64_t c = 0; c < d.c; ++c) {
    const double mean = floats(save_mean)[c], invstd = floats(save_invstd)[c];
    // The sums first, then dx: dx may alias dy.
    const BackwardSums sums = channel_backward_sums(grad_out, in, c, mean, invstd);
    channel_dx(grad_in, grad_out, in, c, floats(gamma)[c], mean, invstd, sums, count);
    floats(dgamma)[c] = static_cast<float>(double{floats(dgamma)[c]} + sums.dy_xhat);
    floats(dbeta)[c] = static_cast<float>(double{floats(dbeta)[c]} + sums.dy);
  }
}

void NaiveBackend::batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) {
  const OpCheck check(Op::batchnorm_stats);
  const BatchNormDesc& d = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm").desc;
  sdk::check_batchnorm_stats(check, d, mean, var, x);
  const Image in(x);
  for (std::int64_t c = 0; c < d.c; ++c) {
    const MeanVar stats = channel_mean_var(in, c);
    floats(mean)[c] = static_cast<float>(stats.mean);
    floats(var)[c] = static_cast<float>(stats.var);  // biased; the caller combines the ranks'
  }
}

void NaiveBackend::batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat,
                                             const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                                             const Tensor& save_invstd) {
  const OpCheck check(Op::batchnorm_backward_reduce);
  const BatchNormDesc& d = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm").desc;
  sdk::check_batchnorm_backward_reduce(check, d, sum_dy, sum_dy_xhat, dy, x, save_mean, save_invstd);
  const Image grad_out(dy), in(x);
  for (std::int64_t c = 0; c < d.c; ++c) {
    const BackwardSums sums = channel_backward_sums(grad_out, in, c, floats(save_mean)[c], floats(save_invstd)[c]);
    floats(sum_dy)[c] = static_cast<float>(sums.dy);  // overwritten: the caller adds the ranks' sums
    floats(sum_dy_xhat)[c] = static_cast<float>(sums.dy_xhat);
  }
}

void NaiveBackend::batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                            const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                                            const Tensor& sum_dy, const Tensor& sum_dy_xhat, std::int64_t count) {
  const OpCheck check(Op::batchnorm_backward_elemt);
  const BatchNormDesc& d = plan_as<BatchNormPlan>(check, plan, "plan_batchnorm").desc;
  sdk::check_batchnorm_backward_elemt(check, d, dx, dy, x, gamma, save_mean, save_invstd, sum_dy, sum_dy_xhat,
                                      count);  // also: count at least this batch's N * H * W
  const Image grad_in(dx), grad_out(dy), in(x);
  for (std::int64_t c = 0; c < d.c; ++c) {
    const BackwardSums global{floats(sum_dy)[c], floats(sum_dy_xhat)[c]};
    channel_dx(grad_in, grad_out, in, c, floats(gamma)[c], floats(save_mean)[c], floats(save_invstd)[c], global,
               static_cast<double>(count));
  }
}

}  // namespace kiln::naive
