// Batch-norm training forward (y, saved mean and inverse std, PyTorch's running-stat update with
// the unbiased variance), inference forward and backward (dx, accumulated dgamma/dbeta) against
// a double reference; f32 (1e-4 relative, oneDNN) and bf16 data (2e-2; statistics stay f32; the
// plugin's own loops), NCHW and channels-last (the plugin's nhwc loops, 1 to 3 threads).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

struct BnRef {
  std::vector<double> y, mean, invstd, running_mean, running_var, dx, dgamma, dbeta, y_infer;
};

BnRef bn_reference(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                   const Tensor& beta, const Tensor& rm, const Tensor& rv, const Tensor& dy,
                   const Tensor& dgamma0, const Tensor& dbeta0) {
  const std::int64_t hw = d.h * d.w, m = d.n * hw;
  const float* xs = x.data_as<float>();
  const float* gs = dy.data_as<float>();
  BnRef r;
  r.y.resize(x.numel());
  r.dx.resize(x.numel());
  r.y_infer.resize(x.numel());
  auto at = [&](std::int64_t n, std::int64_t c, std::int64_t i) { return (n * d.c + c) * hw + i; };
  for (std::int64_t c = 0; c < d.c; ++c) {
    double sum = 0, sq = 0;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) sum += xs[at(n, c, i)];
    const double mean = sum / m;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) sq += (xs[at(n, c, i)] - mean) * (xs[at(n, c, i)] - mean);
    const double var = sq / m, invstd = 1.0 / std::sqrt(var + d.eps);
    const double g = gamma.data_as<float>()[c], b = beta.data_as<float>()[c];
    r.mean.push_back(mean);
    r.invstd.push_back(invstd);
    // PyTorch: running = (1 - momentum) * running + momentum * batch, unbiased variance.
    r.running_mean.push_back((1 - d.momentum) * rm.data_as<float>()[c] + d.momentum * mean);
    r.running_var.push_back((1 - d.momentum) * rv.data_as<float>()[c] +
                            d.momentum * var * m / (m - 1));
    const double infer_invstd = 1.0 / std::sqrt(rv.data_as<float>()[c] + d.eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::int64_t j = at(n, c, i);
        const double xhat = (xs[j] - mean) * invstd;
        r.y[j] = g * xhat + b;
        r.y_infer[j] = g * (xs[j] - rm.data_as<float>()[c]) * infer_invstd + b;
        sum_dy += gs[j];
        sum_dy_xhat += gs[j] * xhat;
      }
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::int64_t j = at(n, c, i);
        const double xhat = (xs[j] - mean) * invstd;
        r.dx[j] = g * invstd * (gs[j] - sum_dy / m - xhat * sum_dy_xhat / m);
      }
    r.dgamma.push_back(dgamma0.data_as<float>()[c] + sum_dy_xhat);
    r.dbeta.push_back(dbeta0.data_as<float>()[c] + sum_dy);
  }
  return r;
}

/// `t` (any float dtype, either layout) as an NCHW f32 tensor (exact), for check_close.
Tensor nchw_f32(const Tensor& t) {
  const std::vector<double> v = test::logical_values(test::to_f32(t));
  return test::f32_tensor(t.shape(), std::vector<float>(v.begin(), v.end()));
}

/// Runs every batch-norm op of `backend` on data stored in `layout` and checks it against the
/// float64 reference.
void check_bn(const BatchNormDesc& d, std::mt19937& rng, Layout layout = Layout::row_major,
              Backend& backend = cpu()) {
  const std::string name = "batchnorm " + std::string(dtype_name(d.dtype)) + " " +
                           std::to_string(d.n) + "x" + std::to_string(d.c) + "x" + std::to_string(d.h) +
                           "x" + std::to_string(d.w) + (layout == Layout::nhwc ? " nhwc " : " nchw ") +
                           std::to_string(backend.device().threads) + " thread(s)";
  const Shape ds{d.n, d.c, d.h, d.w}, cs{d.c};
  // An offset and a scale per tensor so mean and variance are far from 0 and 1.
  Tensor x = test::random_f32(ds, rng, 1.0f, 4.0f);
  x = test::rounded(x, d.dtype);
  const Tensor dy = test::rounded(test::random_f32(ds, rng), d.dtype);
  const Tensor gamma = test::random_f32(cs, rng, 0.5f, 1.5f), beta = test::random_f32(cs, rng);
  Tensor rm = test::random_f32(cs, rng), rv = test::random_f32(cs, rng, 0.5f, 2.0f);
  Tensor dgamma = test::random_f32(cs, rng), dbeta = test::random_f32(cs, rng);
  const BnRef ref = bn_reference(d, x, gamma, beta, rm, rv, dy, dgamma, dbeta);
  const double rtol = d.dtype == DType::f32 ? 1e-4 : 2e-2;
  const double atol = d.dtype == DType::f32 ? 1e-5 : 2e-2;
  auto plan = backend.plan_batchnorm(d);
  const auto stored = [&](const Tensor& t) {  // an NCHW f32 tensor as the op reads it
    return test::to_dtype(layout == Layout::nhwc ? test::to_channels_last(t) : t, d.dtype);
  };
  const auto output = [&] { return test::poisoned(ds, d.dtype).with_layout(layout); };

  Tensor y_infer = output();
  backend.batchnorm_infer_forward(*plan, y_infer, stored(x), gamma, beta, rm, rv);
  test::check_close(nchw_f32(y_infer), ref.y_infer, rtol, atol, name + " inference forward");

  Tensor y = output(), mean = test::poisoned(cs), invstd = test::poisoned(cs);
  const Tensor xd = stored(x);
  backend.batchnorm_train_forward(*plan, y, mean, invstd, xd, gamma, beta, rm, rv);
  test::check_close(nchw_f32(y), ref.y, rtol, atol, name + " training forward");
  test::check_close(mean, ref.mean, 1e-5, 1e-6, name + " saved mean");
  test::check_close(invstd, ref.invstd, 1e-4, 1e-6, name + " saved invstd");
  test::check_close(rm, ref.running_mean, 1e-5, 1e-6, name + " running mean");
  test::check_close(rv, ref.running_var, 1e-4, 1e-6, name + " running var (unbiased)");

  Tensor dx = output();
  backend.batchnorm_backward(*plan, dx, dgamma, dbeta, stored(dy), xd, gamma, mean, invstd);
  std::vector<double> dx_scale(ref.dx.size(), 0.0);
  for (std::size_t i = 0; i < dx_scale.size(); ++i) {
    dx_scale[i] = std::abs(ref.dx[i]) + 0.1;  // dx is a difference of O(1) terms
  }
  test::check_close(nchw_f32(dx), ref.dx, rtol, 0.0, name + " backward dx", &dx_scale);
  test::check_close(dgamma, ref.dgamma, rtol, atol * 10, name + " dgamma (accumulated)");
  test::check_close(dbeta, ref.dbeta, rtol, atol * 10, name + " dbeta (accumulated)");
}

BatchNormDesc bn(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, DType dtype) {
  BatchNormDesc d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.dtype = dtype;
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(batchnorm)

BOOST_AUTO_TEST_CASE(f32_against_reference) {
  std::mt19937 rng(41);
  check_bn(bn(3, 5, 4, 3, DType::f32), rng);
  check_bn(bn(2, 16, 7, 5, DType::f32), rng);
  check_bn(bn(4, 32, 12, 12, DType::f32), rng);
  BatchNormDesc d = bn(4, 3, 1, 1, DType::f32);  // BatchNorm1d-like: H = W = 1
  d.momentum = 0.25f;
  d.eps = 1e-3f;
  check_bn(d, rng);
}

BOOST_AUTO_TEST_CASE(bf16_against_reference) {
  std::mt19937 rng(42);
  check_bn(bn(3, 5, 4, 3, DType::bf16), rng);
  check_bn(bn(2, 16, 7, 5, DType::bf16), rng);
  check_bn(bn(4, 32, 12, 12, DType::bf16), rng);  // large enough to split channels across threads
}

BOOST_AUTO_TEST_CASE(channels_last_against_reference) {
  // The channels-last loops (batchnorm_nhwc.cpp, what every ResNet layer runs; the op tests
  // reached them only below their threading threshold before): each thread sums its own block
  // of rows in f32 chunks of 64 rows flushed into double, so the shapes cover partial chunks,
  // fewer rows than threads x 64, C not a multiple of the SIMD width, one and several chunks per
  // thread, a size below the threshold where the loops run on one thread, and 1, 2 and 3
  // threads (3 splits the rows unevenly).
  std::mt19937 rng(43);
  for (const std::int64_t threads : {1, 2, 3}) {
    ParamMap params("backend");
    params.set("threads", threads, "test");
    const auto backend = test::make_cpu_backend(params);
    for (const DType dtype : {DType::f32, DType::bf16}) {
      check_bn(bn(5, 64, 9, 7, dtype), rng, Layout::nhwc, *backend);
      check_bn(bn(2, 19, 23, 29, dtype), rng, Layout::nhwc, *backend);
      check_bn(bn(2, 3, 61, 67, dtype), rng, Layout::nhwc, *backend);
      check_bn(bn(1, 2048, 3, 3, dtype), rng, Layout::nhwc, *backend);
      check_bn(bn(3, 20, 7, 9, dtype), rng, Layout::nhwc, *backend);
    }
  }
}

BOOST_AUTO_TEST_CASE(channels_last_variance_of_offset_data) {
  // Values 1000 +- 0.01 per channel: a one-pass sum of squares would cancel to noise here. The
  // nhwc forward's per-chunk deviations merged in double must keep mean and invstd to f32 rounding.
  BatchNormDesc d = bn(4, 3, 40, 41, DType::f32);  // 6560 rows x 3 channels: split over threads
  d.eps = 1e-9f;
  std::mt19937 rng(44);
  const Tensor x = test::random_f32({d.n, d.c, d.h, d.w}, rng, 999.99f, 1000.01f);
  const std::int64_t hw = d.h * d.w, m = d.n * hw;
  std::vector<double> want_mean, want_invstd;
  for (std::int64_t c = 0; c < d.c; ++c) {
    double sum = 0, sq = 0;
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) sum += x.data_as<float>()[(n * d.c + c) * hw + i];
    const double mean = sum / static_cast<double>(m);
    for (std::int64_t n = 0; n < d.n; ++n)
      for (std::int64_t i = 0; i < hw; ++i) {
        const double v = x.data_as<float>()[(n * d.c + c) * hw + i] - mean;
        sq += v * v;
      }
    want_mean.push_back(mean);
    want_invstd.push_back(1.0 / std::sqrt(sq / static_cast<double>(m) + d.eps));
  }
  const Shape cs{d.c};
  Tensor y = test::poisoned(x.shape()).with_layout(Layout::nhwc), mean = test::poisoned(cs),
         invstd = test::poisoned(cs), rm = test::f32_tensor(cs, {0, 0, 0}), rv = test::f32_tensor(cs, {1, 1, 1});
  const Tensor gamma = test::f32_tensor(cs, {1, 1, 1}), beta = test::f32_tensor(cs, {0, 0, 0});
  auto plan = cpu().plan_batchnorm(d);
  cpu().batchnorm_train_forward(*plan, y, mean, invstd, test::to_channels_last(x), gamma, beta, rm, rv);
  test::check_close(mean, want_mean, 1e-7, 0.0, "offset data: saved mean");
  test::check_close(invstd, want_invstd, 1e-4, 0.0, "offset data: saved invstd");
}

BOOST_AUTO_TEST_CASE(running_stats_follow_pytorch) {
  // x per channel = {1, 2, 3, 6}: mean 3, biased var 3.5, unbiased var 14/3.
  // PyTorch, momentum 0.1: running_mean = 0.9 * 0 + 0.1 * 3 = 0.3;
  // running_var = 0.9 * 1 + 0.1 * 14/3 = 1.3666667.
  BatchNormDesc d = bn(4, 1, 1, 1, DType::f32);
  auto plan = cpu().plan_batchnorm(d);
  Tensor x = test::f32_tensor({4, 1, 1, 1}, {1, 2, 3, 6});
  Tensor y = test::poisoned({4, 1, 1, 1}), mean = test::poisoned({1}), invstd = test::poisoned({1});
  Tensor rm = test::f32_tensor({1}, {0}), rv = test::f32_tensor({1}, {1});
  Tensor gamma = test::f32_tensor({1}, {1}), beta = test::f32_tensor({1}, {0});
  cpu().batchnorm_train_forward(*plan, y, mean, invstd, x, gamma, beta, rm, rv);
  BOOST_TEST(rm.data_as<float>()[0] == 0.3f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(rv.data_as<float>()[0] == 1.3666667f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(mean.data_as<float>()[0] == 3.0f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(invstd.data_as<float>()[0] == static_cast<float>(1.0 / std::sqrt(3.5 + 1e-5)),
             boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(plan_reuse_and_errors) {
  std::mt19937 rng(43);
  BatchNormDesc d = bn(2, 4, 3, 3, DType::f32);
  auto plan = cpu().plan_batchnorm(d);
  const Tensor x = test::random_f32({2, 4, 3, 3}, rng);
  const Tensor gamma = test::random_f32({4}, rng), beta = test::random_f32({4}, rng);
  Tensor rm = test::random_f32({4}, rng), rv = test::random_f32({4}, rng, 0.5f, 1.0f);
  Tensor y1 = test::poisoned({2, 4, 3, 3}), y2 = test::poisoned({2, 4, 3, 3});
  Tensor mean = test::poisoned({4}), invstd = test::poisoned({4});
  cpu().batchnorm_train_forward(*plan, y1, mean, invstd, x, gamma, beta, rm, rv);
  cpu().batchnorm_train_forward(*plan, y2, mean, invstd, x, gamma, beta, rm, rv);
  BOOST_TEST(std::memcmp(y1.data(), y2.data(), y1.bytes()) == 0);
  Tensor dx = test::poisoned({2, 4, 3, 3}), dgamma = test::poisoned({4}), dbeta = test::poisoned({4});
  const auto step = [&] {
    cpu().batchnorm_train_forward(*plan, y2, mean, invstd, x, gamma, beta, rm, rv);
    cpu().batchnorm_infer_forward(*plan, y2, x, gamma, beta, rm, rv);
    cpu().batchnorm_backward(*plan, dx, dgamma, dbeta, y1, x, gamma, mean, invstd);
  };
  test::check_heap_steady(step);

  Tensor bf_gamma = host_tensor({4}, DType::bf16);
  std::string msg = test::error_text<BackendError>(
      [&] { cpu().batchnorm_train_forward(*plan, y1, mean, invstd, x, bf_gamma, beta, rm, rv); });
  BOOST_TEST(msg.find("cpu backend, batchnorm_train_forward: gamma is bf16(4) but must be f32") !=
                 std::string::npos,
             msg);
  Tensor short_rv = host_tensor({3}, DType::f32);
  msg = test::error_text<BackendError>(
      [&] { cpu().batchnorm_infer_forward(*plan, y1, x, gamma, beta, rm, short_rv); });
  BOOST_TEST(msg.find("running_var is f32(3) but must have shape (4)") != std::string::npos, msg);

  BatchNormDesc one = bn(1, 4, 1, 1, DType::f32);
  auto single = cpu().plan_batchnorm(one);
  Tensor x1 = test::random_f32({1, 4, 1, 1}, rng), y3 = test::poisoned({1, 4, 1, 1});
  msg = test::error_text<BackendError>(
      [&] { cpu().batchnorm_train_forward(*single, y3, mean, invstd, x1, gamma, beta, rm, rv); });
  BOOST_TEST(msg.find("has 1 value per channel; training needs at least 2") != std::string::npos,
             msg);
}

BOOST_AUTO_TEST_SUITE_END()
