// Conformance cases of the synchronised batch-norm ops (batchnorm_stats, batchnorm_backward_reduce,
// batchnorm_backward_elemt), in every dtype and both image layouts.
//
// The batch is split in two halves, as two ranks would hold it, each run through its own plan.
// Each half's batchnorm_stats must give that half's mean and biased variance; the two halves'
// backward_reduce sums, added, must equal the whole batch's dbeta/dgamma; and backward_elemt on
// each half with those sums and the whole batch's count must give the whole batch's dx for that
// half (all against the float64 reference of the whole batch). So the split ops compose to
// exactly the unsplit batch-norm, which is what sync_bn relies on.
#include <cmath>

#include "harness.hpp"
#include "reference.hpp"

namespace kiln::conformance {
namespace {

using ref::Vec;

std::size_t count(const Shape& s) { return static_cast<std::size_t>(shape_numel(s)); }

/// Samples [first, first + n) of a logical NCHW batch of `per_sample` values each.
Vec samples(const Vec& v, std::int64_t first, std::int64_t n, std::int64_t per_sample) {
  return Vec(v.begin() + first * per_sample, v.begin() + (first + n) * per_sample);
}

void batchnorm_sync_case(const Variant& v) {
  const DType dt = v.dtype;
  BatchNormDesc whole;
  whole.n = 4, whole.c = 5, whole.h = 3, whole.w = 4;
  whole.dtype = dt;
  BatchNormDesc half = whole;
  half.n = 2;
  const std::int64_t per_sample = whole.c * whole.h * whole.w;
  const Shape xs{whole.n, whole.c, whole.h, whole.w}, hs{half.n, half.c, half.h, half.w}, cs{whole.c};
  Rng rng(33);
  const auto x = uniform(rng, count(xs), -2, 3, dt);
  const auto dy = uniform(rng, count(xs), -1, 1, dt);
  const auto gamma = uniform(rng, count(cs), 0.5, 1.5, DType::f32);
  const Vec zeros(count(cs), 0.0), ones(count(cs), 1.0);
  const auto plan = backend().plan_batchnorm(half);
  const double tol = tolerance(dt), f32_tol = tolerance(DType::f32);

  const auto full = ref::batchnorm_train(whole, x, gamma, zeros, zeros, ones);
  const auto full_back = ref::batchnorm_backward(whole, dy, x, gamma, full.mean, full.invstd, zeros, zeros);
  const Tensor gamma_t = upload(gamma, cs, DType::f32);
  const Tensor mean_t = upload(full.mean, cs, DType::f32), invstd_t = upload(full.invstd, cs, DType::f32);

  Vec sum_dy(count(cs), 0.0), sum_dy_xhat(count(cs), 0.0);
  Tensor x_half[2], dy_half[2];
  for (int r = 0; r < 2; ++r) {
    const Vec xr = samples(x, r * half.n, half.n, per_sample);
    x_half[r] = upload(xr, hs, dt, v.layout);
    dy_half[r] = upload(samples(dy, r * half.n, half.n, per_sample), hs, dt, v.layout);
    const auto own = ref::batchnorm_train(half, xr, gamma, zeros, zeros, ones);
    Vec own_var(count(cs));
    for (std::size_t c = 0; c < own_var.size(); ++c) {
      own_var[c] = 1.0 / (own.invstd[c] * own.invstd[c]) - double{half.eps};
    }
    const Tensor mean = poisoned(cs, DType::f32), var = poisoned(cs, DType::f32);
    backend().batchnorm_stats(*plan, mean, var, x_half[r]);
    expect_close(fetch(mean), own.mean, f32_tol, "mean of one half");
    expect_close(fetch(var), own_var, f32_tol, "biased variance of one half");

    const Tensor s1 = poisoned(cs, DType::f32), s2 = poisoned(cs, DType::f32);
    backend().batchnorm_backward_reduce(*plan, s1, s2, dy_half[r], x_half[r], mean_t, invstd_t);
    const Vec g1 = fetch(s1), g2 = fetch(s2);
    for (std::size_t c = 0; c < sum_dy.size(); ++c) {
      sum_dy[c] += g1[c];
      sum_dy_xhat[c] += g2[c];
    }
  }
  expect_close(sum_dy, full_back.dbeta, tol, "sum_dy over both halves = the whole batch's dbeta");
  expect_close(sum_dy_xhat, full_back.dgamma, tol, "sum_dy_xhat over both halves = the whole batch's dgamma");

  const Tensor sum_dy_t = upload(sum_dy, cs, DType::f32), sum_dy_xhat_t = upload(sum_dy_xhat, cs, DType::f32);
  for (int r = 0; r < 2; ++r) {
    const Tensor dx = poisoned(hs, dt, v.layout);
    backend().batchnorm_backward_elemt(*plan, dx, dy_half[r], x_half[r], gamma_t, mean_t, invstd_t, sum_dy_t,
                                       sum_dy_xhat_t, whole.n * whole.h * whole.w);
    expect_close(fetch(dx), samples(full_back.dx, r * half.n, half.n, per_sample), tol,
                 "dx of one half = the whole batch's dx there");
  }
}

}  // namespace

void add_norm_sync_cases(CaseList& cases) {
  cases.add("batchnorm_sync", {Op::batchnorm_stats, Op::batchnorm_backward_reduce, Op::batchnorm_backward_elemt},
            Axes::dtypes_x_layouts, batchnorm_sync_case);
}

}  // namespace kiln::conformance
