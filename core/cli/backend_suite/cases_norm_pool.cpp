// Conformance cases of batch-norm (training forward with saved statistics and the running-stat
// update, inference forward, backward with accumulated dgamma/dbeta), max/average pooling
// forward and backward, global average pooling and u8 image normalisation, each in both image
// layouts.
//
// Image tensors carry the variant's layout and compute dtype; batch-norm statistics, gamma, beta
// and their gradients are f32 (C). The batch-norm backward is given the save_mean/save_invstd
// the backend's own forward wrote, exactly as BatchNorm2d chains them. Max-pool inputs are a
// permutation of distinct values per (n, c) plane, exact in bf16/f16, so no window has a tie and
// the gradient's destination is unambiguous.
#include <algorithm>
#include <numeric>
#include <string>

#include "harness.hpp"
#include "reference.hpp"

namespace kiln::conformance {
namespace {

std::size_t count(const Shape& s) { return static_cast<std::size_t>(shape_numel(s)); }

/// One batch-norm problem of (n, c, h, w) through forward, backward and inference.
void batchnorm_shape_case(const Variant& v, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  const DType dt = v.dtype;
  BatchNormDesc d;
  d.n = n, d.c = c, d.h = h, d.w = w;
  d.eps = 1e-5f;
  d.momentum = 0.1f;
  d.dtype = dt;
  const Shape xs{d.n, d.c, d.h, d.w}, cs{d.c};
  Rng rng(21);
  const auto x = uniform(rng, count(xs), -2, 3, dt);
  const auto gamma = uniform(rng, count(cs), 0.5, 1.5, DType::f32);
  const auto beta = uniform(rng, count(cs), -0.5, 0.5, DType::f32);
  const auto rmean = uniform(rng, count(cs), -0.5, 0.5, DType::f32);
  const auto rvar = uniform(rng, count(cs), 0.5, 2.0, DType::f32);
  const Tensor x_t = upload(x, xs, dt, v.layout);
  const Tensor gamma_t = upload(gamma, cs, DType::f32), beta_t = upload(beta, cs, DType::f32);
  const auto plan = backend().plan_batchnorm(d);
  const double tol = tolerance(dt);
  const double f32_tol = tolerance(DType::f32);

  // Training forward. The statistics are f32 from the same (rounded) x, so they are held to f32
  // accuracy whatever the data dtype.
  const auto want = ref::batchnorm_train(d, x, gamma, beta, rmean, rvar);
  const Tensor y = poisoned(xs, dt, v.layout);
  const Tensor save_mean = poisoned(cs, DType::f32), save_invstd = poisoned(cs, DType::f32);
  const Tensor rmean_t = upload(rmean, cs, DType::f32), rvar_t = upload(rvar, cs, DType::f32);
  backend().batchnorm_train_forward(*plan, y, save_mean, save_invstd, x_t, gamma_t, beta_t, rmean_t, rvar_t);
  expect_close(fetch(y), want.y, tol, "y (train)");
  expect_close(fetch(save_mean), want.mean, f32_tol, "save_mean");
  expect_close(fetch(save_invstd), want.invstd, f32_tol, "save_invstd");
  expect_close(fetch(rmean_t), want.running_mean, f32_tol, "running_mean");
  expect_close(fetch(rvar_t), want.running_var, f32_tol, "running_var (unbiased update)");

  // Backward from the forward's saved statistics; dgamma/dbeta accumulate.
  const auto dy = uniform(rng, count(xs), -1, 1, dt);
  const auto dgamma0 = uniform(rng, count(cs), -1, 1, DType::f32);
  const auto dbeta0 = uniform(rng, count(cs), -1, 1, DType::f32);
  const auto bwant = ref::batchnorm_backward(d, dy, x, gamma, want.mean, want.invstd, dgamma0, dbeta0);
  const Tensor dx = poisoned(xs, dt, v.layout);
  const Tensor dgamma = upload(dgamma0, cs, DType::f32), dbeta = upload(dbeta0, cs, DType::f32);
  backend().batchnorm_backward(*plan, dx, dgamma, dbeta, upload(dy, xs, dt, v.layout), x_t, gamma_t, save_mean,
                               save_invstd);
  expect_close(fetch(dx), bwant.dx, tol, "dx");
  expect_close(fetch(dgamma), bwant.dgamma, tol, "dgamma (accumulated)");
  expect_close(fetch(dbeta), bwant.dbeta, tol, "dbeta (accumulated)");

  // Inference forward from running statistics (left unchanged).
  const Tensor yi = poisoned(xs, dt, v.layout);
  const Tensor rmean_i = upload(rmean, cs, DType::f32), rvar_i = upload(rvar, cs, DType::f32);
  backend().batchnorm_infer_forward(*plan, yi, x_t, gamma_t, beta_t, rmean_i, rvar_i);
  expect_close(fetch(yi), ref::batchnorm_infer(d, x, gamma, beta, rmean, rvar), tol, "y (inference)");
  expect_equal(fetch(rvar_i), rvar, "running_var untouched by inference");
}

/// Each (n, c) plane a random permutation of distinct integers below 2^8 in magnitude, times
/// 2^-5 (at most 8 significant bits: exact in bf16 and f16).
std::vector<double> tie_free(Rng& rng, const Shape& s) {
  const std::int64_t plane = s[2] * s[3];
  std::vector<double> out;
  std::vector<std::int64_t> perm(static_cast<std::size_t>(plane));
  for (std::int64_t p = 0; p < s[0] * s[1]; ++p) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (const std::int64_t i : perm) out.push_back(static_cast<double>(2 * i - (plane - 1)) / 32.0);
  }
  return out;
}

void pool_case(Pool2dDesc d, const Variant& v) {
  const DType dt = v.dtype;
  d.dtype = dt;
  const Shape xs{d.n, d.c, d.h, d.w}, ys{d.n, d.c, d.out_h(), d.out_w()};
  Rng rng(22 + static_cast<std::uint64_t>(d.kernel_h));
  const auto x = tie_free(rng, xs);
  const auto dy = uniform(rng, count(ys), -1, 1, dt);
  const Tensor x_t = upload(x, xs, dt, v.layout);
  const auto plan = backend().plan_pool2d(d);

  const Tensor y = poisoned(ys, dt, v.layout);
  backend().pool2d_forward(*plan, y, x_t);
  const auto y_got = fetch(y);
  expect_close(y_got, ref::pool2d_forward(d, x), tolerance(dt), "y (forward)");

  const Tensor dx = poisoned(xs, dt, v.layout);
  backend().pool2d_backward(*plan, dx, upload(dy, ys, dt, v.layout), x_t, y);
  expect_close(fetch(dx), ref::pool2d_backward(d, dy, x), tolerance(dt), "dx (backward)");
}

Pool2dDesc pool(Pool2dDesc::Kind kind, std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
  Pool2dDesc d;
  d.kind = kind;
  d.n = 2, d.c = 3, d.h = 11, d.w = 11;  // 121 values per plane: tie_free needs <= 256
  d.kernel_h = d.kernel_w = kernel;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  return d;
}

void global_avgpool_case(const Variant& v) {
  const DType dt = v.dtype;
  const std::int64_t n = 3, c = 5, h = 4, w = 6;
  Rng rng(23);
  const auto x = uniform(rng, static_cast<std::size_t>(n * c * h * w), -1, 1, dt);
  const Tensor y = poisoned({n, c}, dt);
  backend().global_avgpool_forward(y, upload(x, {n, c, h, w}, dt, v.layout));
  expect_close(fetch(y), ref::global_avgpool_forward(n, c, h * w, x), tolerance(dt), "y (forward)");

  const auto dy = uniform(rng, static_cast<std::size_t>(n * c), -1, 1, dt);
  const Tensor dx = poisoned({n, c, h, w}, dt, v.layout);
  backend().global_avgpool_backward(dx, upload(dy, {n, c}, dt));
  expect_close(fetch(dx), ref::global_avgpool_backward(n, c, h * w, dy), tolerance(dt), "dx (backward)");
}

void normalize_image_case(const Variant& v) {
  const DType dt = v.dtype;
  const std::int64_t n = 2, h = 6, w = 5;
  Rng rng(24);
  const auto src = integers(rng, static_cast<std::size_t>(n * h * w * 3), 256);
  ImageNormalize norm;
  norm.mean[1] = 0.5f;  // not the defaults only
  norm.std[2] = 0.3f;
  const Tensor dst = poisoned({n, 3, h, w}, dt, v.layout);
  backend().normalize_image(dst, upload(src, {n, h, w, 3}, DType::u8), norm);
  expect_close(fetch(dst), ref::normalize_image(n, h, w, src, norm), tolerance(dt), "dst");
}

}  // namespace

void add_norm_pool_cases(CaseList& cases) {
  cases.add("batchnorm", {Op::batchnorm_train_forward, Op::batchnorm_infer_forward, Op::batchnorm_backward},
            Axes::dtypes_x_layouts, [](const Variant& v) { batchnorm_shape_case(v, 4, 6, 5, 3); });
  // A ResNet-like channel count (a multiple of 8): the shape for which the cuda backend's NHWC
  // f16 plans reach cuDNN's persistent Ex kernels (the 6-channel case above falls back to spatial).
  cases.add("batchnorm_c64", {Op::batchnorm_train_forward, Op::batchnorm_infer_forward, Op::batchnorm_backward},
            Axes::dtypes_x_layouts, [](const Variant& v) { batchnorm_shape_case(v, 8, 64, 7, 7); });
  cases.add("maxpool_3x3_s2_p1", {Op::pool2d_forward, Op::pool2d_backward}, Axes::dtypes_x_layouts,
            [](const Variant& v) { pool_case(pool(Pool2dDesc::Kind::max, 3, 2, 1), v); });
  cases.add("avgpool_2x2_s2", {Op::pool2d_forward, Op::pool2d_backward}, Axes::dtypes_x_layouts,
            [](const Variant& v) { pool_case(pool(Pool2dDesc::Kind::average, 2, 2, 0), v); });
  cases.add("avgpool_3x3_s1_p1_count_pad", {Op::pool2d_forward, Op::pool2d_backward}, Axes::dtypes_x_layouts,
            [](const Variant& v) { pool_case(pool(Pool2dDesc::Kind::average, 3, 1, 1), v); });
  cases.add("global_avgpool", {Op::global_avgpool_forward, Op::global_avgpool_backward},
            Axes::dtypes_x_layouts, global_avgpool_case);
  cases.add("normalize_image", {Op::normalize_image}, Axes::dtypes_x_layouts, normalize_image_case);
}

}  // namespace kiln::conformance
