// The cuda backend's cuDNN / cuBLAS ops on a real GPU against float64 references: conv2d
// forward / backward-data / backward-filter (groups, stride, dilation, padding; f32 master
// weights and f32 weight gradients for f16/bf16 plans; accumulation), batch-norm train / infer /
// backward (saved statistics, PyTorch running-stat rule, accumulated dgamma/dbeta), max and
// average pooling forward / backward, matmul (+bias, every transpose, alpha/beta) and bias_grad,
// in f32, f16 and bf16 and in both NCHW and NHWC (plus mixed layouts). Fresh random inputs,
// outputs poisoned with NaN, relative-norm tolerance 1e-5 for f32 and 1e-2 for f16/bf16.
// Labelled `gpu`; without a device it exits 77, which CTest reports as skipped, never passed.
#define BOOST_TEST_MODULE cuda_dnn_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include <fmt/format.h>

#include "gpu_fixture.hpp"
#include "kiln/errors.hpp"
#include "reference.hpp"
#include "../gpu/cuda_device_skip.hpp"

using namespace kiln;
using namespace kiln::cuda_test;

namespace {

constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};
constexpr Layout kLayouts[] = {Layout::row_major, Layout::nhwc};

Layout other(Layout l) { return l == Layout::nhwc ? Layout::row_major : Layout::nhwc; }

void expect_close(const Values& got, const Values& want, double tol, const std::string& what) {
  const double err = relative_error(got, want);
  BOOST_TEST(err <= tol, what << ": relative error " << err << " > " << tol);
  BOOST_TEST_MESSAGE(what << ": relative error " << err);
}

Values plus(const Values& a, const Values& b) {
  Values c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

std::size_t count(const Shape& s) { return static_cast<std::size_t>(shape_numel(s)); }

}  // namespace

BOOST_AUTO_TEST_CASE(conv2d_matches_float64_reference) {
  std::mt19937 rng(7);
  Conv2dDesc a;  // strided, asymmetric image, padded
  a.n = 2, a.c = 8, a.h = 9, a.w = 7, a.k = 6, a.r = 3, a.s = 3;
  a.stride_h = 2, a.stride_w = 1, a.pad_h = 1, a.pad_w = 1;
  Conv2dDesc b;  // grouped and dilated, output layout differs from the input's
  b.n = 2, b.c = 6, b.h = 8, b.w = 8, b.k = 4, b.r = 3, b.s = 3;
  b.pad_h = b.pad_w = 2, b.dilation_h = b.dilation_w = 2, b.groups = 2;
  for (const bool mixed : {false, true}) {
    for (const DType dt : kDtypes) {
      for (const Layout L : kLayouts) {
        Conv2dDesc d = mixed ? b : a;
        d.dtype = dt;
        const std::string ctx = std::string(mixed ? "grouped/dilated, mixed layouts" : "strided") + " " +
                                std::string(dtype_name(dt)) + " " + layout_name(L);
        const Layout out_layout = mixed ? other(L) : L;
        const Shape xs{d.n, d.c, d.h, d.w}, ys{d.n, d.k, d.out_h(), d.out_w()}, ws{d.k, d.c / d.groups, d.r, d.s};
        auto plan = gpu().plan_conv2d(d);
        const Values x = random_values(count(xs), rng, dt);
        const Values w_master = random_values(count(ws), rng, DType::f32, -0.5, 0.5);
        const Values w = rounded(w_master, dt);  // what a dt plan reads from f32 master weights
        const Tensor x_t = upload(x, xs, dt, L);
        const Tensor w_t = upload(w_master, ws, DType::f32);

        const Tensor y_t = poisoned(ys, dt, out_layout);
        gpu().conv2d_forward(*plan, y_t, x_t, w_t);
        expect_close(download(y_t), ref_conv_forward(d, x, w), tolerance(dt), ctx + " forward");

        const Values dy = random_values(count(ys), rng, dt);
        const Tensor dy_t = upload(dy, ys, dt, L);
        const Tensor dx_t = poisoned(xs, dt, out_layout);
        gpu().conv2d_backward_data(*plan, dx_t, dy_t, w_t);
        expect_close(download(dx_t), ref_conv_backward_data(d, dy, w), tolerance(dt), ctx + " backward-data");

        // f32 master gradient, accumulated onto what is there.
        const Values dw0 = random_values(count(ws), rng, DType::f32);
        const Tensor dw_t = upload(dw0, ws, DType::f32);
        gpu().conv2d_backward_filter(*plan, dw_t, dy_t, x_t, Accumulate::yes);
        const Values dw_ref = ref_conv_backward_filter(d, dy, x);
        expect_close(download(dw_t), plus(dw0, dw_ref), tolerance(dt), ctx + " backward-filter f32 +=");

        // Gradient in the plan's dtype, overwritten (poisoned first).
        const Tensor dw2_t = poisoned(ws, dt);
        gpu().conv2d_backward_filter(*plan, dw2_t, dy_t, x_t, Accumulate::no);
        expect_close(download(dw2_t), dw_ref, tolerance(dt), ctx + " backward-filter =");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(batchnorm_matches_float64_reference) {
  std::mt19937 rng(11);
  for (const DType dt : kDtypes) {
    for (const Layout L : kLayouts) {
      BatchNormDesc d;
      d.n = 4, d.c = 5, d.h = 3, d.w = 6, d.eps = 1e-5f, d.momentum = 0.1f, d.dtype = dt;
      const std::string ctx = std::string(dtype_name(dt)) + " " + layout_name(L);
      const Shape xs{d.n, d.c, d.h, d.w}, cs{d.c};
      auto plan = gpu().plan_batchnorm(d);
      const Values x = random_values(count(xs), rng, dt, -2.0, 3.0);
      const Values gamma = random_values(count(cs), rng, DType::f32, 0.5, 1.5);
      const Values beta = random_values(count(cs), rng, DType::f32);
      const Values rm = random_values(count(cs), rng, DType::f32);
      const Values rv = random_values(count(cs), rng, DType::f32, 0.5, 1.5);
      const Tensor x_t = upload(x, xs, dt, L), gamma_t = upload(gamma, cs, DType::f32),
                   beta_t = upload(beta, cs, DType::f32), rm_t = upload(rm, cs, DType::f32),
                   rv_t = upload(rv, cs, DType::f32);
      const Tensor y_t = poisoned(xs, dt, L), mean_t = poisoned(cs, DType::f32),
                   invstd_t = poisoned(cs, DType::f32);
      gpu().batchnorm_train_forward(*plan, y_t, mean_t, invstd_t, x_t, gamma_t, beta_t, rm_t, rv_t);
      const BnForward f = ref_bn_train(d, x, gamma, beta, rm, rv);
      const double tol = tolerance(dt);
      expect_close(download(y_t), f.y, tol, ctx + " train y");
      expect_close(download(mean_t), f.mean, tol, ctx + " save_mean");
      expect_close(download(invstd_t), f.invstd, tol, ctx + " save_invstd");
      expect_close(download(rm_t), f.running_mean, tol, ctx + " running_mean");
      expect_close(download(rv_t), f.running_var, tol, ctx + " running_var (unbiased)");

      const Values rm1 = download(rm_t), rv1 = download(rv_t);
      const Tensor yi_t = poisoned(xs, dt, other(L));
      gpu().batchnorm_infer_forward(*plan, yi_t, x_t, gamma_t, beta_t, rm_t, rv_t);
      expect_close(download(yi_t), ref_bn_infer(d, x, gamma, beta, rm1, rv1), tol, ctx + " infer y (other layout)");

      const Values dy = random_values(count(xs), rng, dt);
      const Values dg0 = random_values(count(cs), rng, DType::f32), db0 = random_values(count(cs), rng, DType::f32);
      const Tensor dy_t = upload(dy, xs, dt, L), dx_t = poisoned(xs, dt, L),
                   dg_t = upload(dg0, cs, DType::f32), db_t = upload(db0, cs, DType::f32);
      gpu().batchnorm_backward(*plan, dx_t, dg_t, db_t, dy_t, x_t, gamma_t, mean_t, invstd_t);
      const BnBackward g = ref_bn_backward(d, dy, x, gamma, f.mean, f.invstd);
      expect_close(download(dx_t), g.dx, tol, ctx + " backward dx");
      expect_close(download(dg_t), plus(dg0, g.dgamma), tol, ctx + " backward dgamma +=");
      expect_close(download(db_t), plus(db0, g.dbeta), tol, ctx + " backward dbeta +=");
    }
  }
}

// The Ex batch-norm path with a ResNet-like channel count: nhwc f16 and bf16 must reach cuDNN's
// persistent kernels (the backend's counters say which mode ran) and still match the reference;
// a backward on another x than the plan's last training forward is refused (the reserve space
// would not belong to it).
static void batchnorm_nhwc_reaches_the_persistent_ex_kernels(DType dtype) {
  std::mt19937 rng(17);
  BatchNormDesc d;
  d.n = 8, d.c = 64, d.h = 7, d.w = 7, d.eps = 1e-5f, d.momentum = 0.1f, d.dtype = dtype;
  const Shape xs{d.n, d.c, d.h, d.w}, cs{d.c};
  auto plan = gpu().plan_batchnorm(d);
  const Values x = random_values(count(xs), rng, d.dtype, -2.0, 3.0);
  const Values gamma = random_values(count(cs), rng, DType::f32, 0.5, 1.5);
  const Values beta = random_values(count(cs), rng, DType::f32);
  const Values rm = random_values(count(cs), rng, DType::f32);
  const Values rv = random_values(count(cs), rng, DType::f32, 0.5, 1.5);
  const Tensor x_t = upload(x, xs, d.dtype, Layout::nhwc), gamma_t = upload(gamma, cs, DType::f32),
               beta_t = upload(beta, cs, DType::f32), rm_t = upload(rm, cs, DType::f32),
               rv_t = upload(rv, cs, DType::f32);
  const Tensor y_t = poisoned(xs, d.dtype, Layout::nhwc), mean_t = poisoned(cs, DType::f32),
               invstd_t = poisoned(cs, DType::f32);
  const double persistent_before = gpu().counters()["cudnn_batchnorm_persistent_calls"];
  gpu().batchnorm_train_forward(*plan, y_t, mean_t, invstd_t, x_t, gamma_t, beta_t, rm_t, rv_t);
  const BnForward f = ref_bn_train(d, x, gamma, beta, rm, rv);
  const double tol = tolerance(d.dtype);
  expect_close(download(y_t), f.y, tol, "persistent train y");
  expect_close(download(mean_t), f.mean, tol, "persistent save_mean");
  expect_close(download(invstd_t), f.invstd, tol, "persistent save_invstd");
  expect_close(download(rv_t), f.running_var, tol, "persistent running_var");

  const Values dy = random_values(count(xs), rng, d.dtype);
  const Tensor dy_t = upload(dy, xs, d.dtype, Layout::nhwc), dx_t = poisoned(xs, d.dtype, Layout::nhwc),
               dg_t = upload(Values(count(cs), 0.0), cs, DType::f32),
               db_t = upload(Values(count(cs), 0.0), cs, DType::f32);
  gpu().batchnorm_backward(*plan, dx_t, dg_t, db_t, dy_t, x_t, gamma_t, mean_t, invstd_t);
  const BnBackward g = ref_bn_backward(d, dy, x, gamma, f.mean, f.invstd);
  expect_close(download(dx_t), g.dx, tol, "persistent backward dx");
  expect_close(download(dg_t), g.dgamma, tol, "persistent backward dgamma");
  expect_close(download(db_t), g.dbeta, tol, "persistent backward dbeta");
  const double persistent_calls = gpu().counters()["cudnn_batchnorm_persistent_calls"] - persistent_before;
  BOOST_TEST(persistent_calls == 2.0, "forward and backward in SPATIAL_PERSISTENT: " << persistent_calls
                                          << " of 2 (cuDNN refused persistent for this shape and the plan fell back)");

  // The reserve space belongs to x_t's forward: a backward on a copy of x is refused only when
  // cuDNN asked for a reserve (otherwise there is nothing to pair and the call is fine).
  const Tensor x2_t = upload(x, xs, d.dtype, Layout::nhwc);
  try {
    gpu().batchnorm_backward(*plan, dx_t, dg_t, db_t, dy_t, x2_t, gamma_t, mean_t, invstd_t);
    BOOST_TEST_MESSAGE("no reserve space for plain batch-norm: a backward on another x is allowed");
  } catch (const BackendError& e) {
    BOOST_TEST(std::string(e.what()).find("reserve space") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(batchnorm_nhwc_f16_reaches_the_persistent_ex_kernels) {
  batchnorm_nhwc_reaches_the_persistent_ex_kernels(DType::f16);
}

BOOST_AUTO_TEST_CASE(batchnorm_nhwc_bf16_reaches_the_persistent_ex_kernels) {
  batchnorm_nhwc_reaches_the_persistent_ex_kernels(DType::bf16);
}

// fp32 NHWC: what TF32 runs under the auto layout, and `activation_layout = "nhwc"` in fp32
// (passed on an H200, 2026-12-04).
BOOST_AUTO_TEST_CASE(batchnorm_nhwc_f32_reaches_the_persistent_ex_kernels) {
  batchnorm_nhwc_reaches_the_persistent_ex_kernels(DType::f32);
}

BOOST_AUTO_TEST_CASE(pooling_matches_float64_reference) {
  std::mt19937 rng(13);
  for (const auto kind : {Pool2dDesc::Kind::max, Pool2dDesc::Kind::average}) {
    for (const DType dt : kDtypes) {
      for (const Layout L : kLayouts) {
        Pool2dDesc d;
        d.kind = kind, d.n = 2, d.c = 3, d.h = 9, d.w = 8;
        d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.dtype = dt;
        const std::string ctx = std::string(kind == Pool2dDesc::Kind::max ? "max " : "average ") +
                                std::string(dtype_name(dt)) + " " + layout_name(L);
        const Shape xs{d.n, d.c, d.h, d.w}, ys{d.n, d.c, d.out_h(), d.out_w()};
        // Distinct values per plane, exact in every dtype (no ties for the max's argmax).
        Values x(count(xs));
        const std::int64_t plane = d.h * d.w;
        std::vector<std::int64_t> perm(static_cast<std::size_t>(plane));
        for (std::int64_t p = 0; p < d.n * d.c; ++p) {
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), rng);
          for (std::int64_t i = 0; i < plane; ++i) {
            x[static_cast<std::size_t>(p * plane + i)] = static_cast<double>(perm[static_cast<std::size_t>(i)] - plane / 2) / 32.0;
          }
        }
        auto plan = gpu().plan_pool2d(d);
        const Tensor x_t = upload(x, xs, dt, L), y_t = poisoned(ys, dt, L);
        gpu().pool2d_forward(*plan, y_t, x_t);
        expect_close(download(y_t), rounded(ref_pool_forward(d, x), dt), tolerance(dt), ctx + " forward");

        const Values dy = random_values(count(ys), rng, dt);
        const Tensor dy_t = upload(dy, ys, dt, L), dx_t = poisoned(xs, dt, other(L));
        gpu().pool2d_backward(*plan, dx_t, dy_t, x_t, y_t);
        expect_close(download(dx_t), ref_pool_backward(d, dy, x), tolerance(dt), ctx + " backward (dx other layout)");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_matches_float64_reference) {
  std::mt19937 rng(17);
  const std::int64_t m = 33, n = 17, k = 29;
  for (const DType dt : kDtypes) {
    for (const Transpose ta : {Transpose::no, Transpose::yes}) {
      for (const Transpose tb : {Transpose::no, Transpose::yes}) {
        for (const DType ct : {DType::f32, dt}) {
          for (const bool with_bias : {false, true}) {
            for (const double beta : {0.0, 0.5}) {
              const std::string ctx = fmt::format("a/b {} c {} ta {} tb {} bias {} beta {}", dtype_name(dt),
                                                  dtype_name(ct), ta == Transpose::yes, tb == Transpose::yes,
                                                  with_bias, beta);
              const Shape as = ta == Transpose::no ? Shape{m, k} : Shape{k, m};
              const Shape bs = tb == Transpose::no ? Shape{k, n} : Shape{n, k};
              const Values av = random_values(count(as), rng, dt), bv = random_values(count(bs), rng, dt);
              const Values c0 = random_values(static_cast<std::size_t>(m * n), rng, ct);
              const Values bias = with_bias ? random_values(static_cast<std::size_t>(n), rng, DType::f32) : Values{};
              const Tensor a_t = upload(av, as, dt), b_t = upload(bv, bs, dt);
              const Tensor c_t = beta == 0.0 ? poisoned({m, n}, ct) : upload(c0, {m, n}, ct);
              const Tensor bias_t = with_bias ? upload(bias, {n}, DType::f32) : Tensor();
              gpu().matmul(c_t, a_t, ta, b_t, tb, 1.5f, static_cast<float>(beta), bias_t);
              // An f32 bias meets a half c in c's dtype (the epilogue's bias type).
              const Values bias_seen = with_bias ? rounded(bias, ct) : Values{};
              expect_close(download(c_t), ref_matmul(m, n, k, av, ta, bv, tb, 1.5, beta, c0, bias_seen),
                           tolerance(ct == DType::f32 ? dt : ct), ctx);
            }
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bias_grad_matches_float64_reference) {
  std::mt19937 rng(19);
  const std::int64_t m = 37, n = 23;
  for (const DType dt : kDtypes) {
    const Values dy = random_values(static_cast<std::size_t>(m * n), rng, dt);
    Values sums(static_cast<std::size_t>(n), 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) sums[static_cast<std::size_t>(j)] += dy[static_cast<std::size_t>(i * n + j)];
    const Tensor dy_t = upload(dy, {m, n}, dt);
    const Tensor db_t = poisoned({n}, DType::f32);
    gpu().bias_grad(db_t, dy_t, Accumulate::no);
    expect_close(download(db_t), sums, tolerance(DType::f32), std::string(dtype_name(dt)) + " bias_grad =");
    const Values db0 = random_values(static_cast<std::size_t>(n), rng, DType::f32);
    const Tensor db2_t = upload(db0, {n}, DType::f32);
    gpu().bias_grad(db2_t, dy_t, Accumulate::yes);
    expect_close(download(db2_t), plus(db0, sums), tolerance(DType::f32), std::string(dtype_name(dt)) + " bias_grad +=");
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_named) {
  Conv2dDesc d;
  d.n = 2, d.c = 3, d.h = 6, d.w = 6, d.k = 4, d.r = 3, d.s = 3;
  auto plan = gpu().plan_conv2d(d);
  const Tensor x = gpu().allocate({2, 3, 6, 6}, DType::f32, MemoryKind::device);
  const Tensor w = gpu().allocate({4, 3, 3, 3}, DType::f32, MemoryKind::device);
  const Tensor wrong_y = gpu().allocate({2, 4, 6, 6}, DType::f32, MemoryKind::device);
  try {
    gpu().conv2d_forward(*plan, wrong_y, x, w);
    BOOST_FAIL("expected a BackendError");
  } catch (const BackendError& e) {
    BOOST_TEST(std::string(e.what()) ==
               "cuda backend, conv2d_forward: y is f32(2, 4, 6, 6) but must have shape (2, 4, 4, 4); "
               "fix the arguments the calling layer passes");
  }
  const Tensor host_c = host_tensor({2, 2}, DType::f32);
  const Tensor a = gpu().allocate({2, 2}, DType::f32, MemoryKind::device);
  try {
    gpu().matmul(host_c, a, Transpose::no, a, Transpose::no, 1.0f, 0.0f, Tensor());
    BOOST_FAIL("expected a BackendError");
  } catch (const BackendError& e) {
    BOOST_TEST(std::string(e.what()).find("cuda backend, matmul: c f32(2, 2) is in host memory") == 0, e.what());
  }
}

int main(int argc, char** argv) {
  if (const int skip = kiln::test::skip_without_cuda_device("the cuda dnn op test")) return skip;
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
