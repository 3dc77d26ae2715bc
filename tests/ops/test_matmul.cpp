// matmul and bias_grad against a double-precision reference.
// Bound: |got - ref| <= 1e-5 * sum_k |alpha a_mk b_kn| + |beta c| + |bias| (f32 accumulation of
// K products; the worst-case error grows with K, the observed one is far below this).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

struct Problem {
  std::int64_t m, n, k;
};

/// Element (r, c) of op(t) where t is row-major and op transposes when `tr` is yes.
double at(const Tensor& t, Transpose tr, std::int64_t r, std::int64_t c) {
  const float* p = t.data_as<float>();
  return tr == Transpose::no ? p[r * t.dim(1) + c] : p[c * t.dim(1) + r];
}

void run_case(const Problem& pr, Transpose ta, Transpose tb, float alpha, float beta,
              bool with_bias, std::mt19937& rng) {
  Tensor a = test::random_f32(ta == Transpose::no ? Shape{pr.m, pr.k} : Shape{pr.k, pr.m}, rng);
  Tensor b = test::random_f32(tb == Transpose::no ? Shape{pr.k, pr.n} : Shape{pr.n, pr.k}, rng);
  Tensor bias = with_bias ? test::random_f32({pr.n}, rng) : Tensor();
  Tensor c = beta != 0.0f ? test::random_f32({pr.m, pr.n}, rng) : test::poisoned({pr.m, pr.n});
  std::vector<double> want(static_cast<std::size_t>(pr.m * pr.n)), scale(want.size());
  const float* c0 = c.data_as<float>();
  for (std::int64_t i = 0; i < pr.m; ++i) {
    for (std::int64_t j = 0; j < pr.n; ++j) {
      double sum = 0.0, mag = 0.0;
      for (std::int64_t q = 0; q < pr.k; ++q) {
        const double prod = at(a, ta, i, q) * at(b, tb, q, j);
        sum += prod;
        mag += std::abs(prod);
      }
      double v = alpha * sum, s = std::abs(alpha) * mag;
      if (beta != 0.0f) v += beta * c0[i * pr.n + j], s += std::abs(beta * c0[i * pr.n + j]);
      if (with_bias) v += bias.data_as<float>()[j], s += std::abs(bias.data_as<float>()[j]);
      want[static_cast<std::size_t>(i * pr.n + j)] = v;
      scale[static_cast<std::size_t>(i * pr.n + j)] = s;
    }
  }
  cpu().matmul(c, a, ta, b, tb, alpha, beta, bias);
  const std::string what = "matmul " + std::to_string(pr.m) + "x" + std::to_string(pr.n) + "x" +
                           std::to_string(pr.k) + " ta=" + std::to_string(int(ta)) +
                           " tb=" + std::to_string(int(tb)) + " alpha=" + std::to_string(alpha) +
                           " beta=" + std::to_string(beta) + " bias=" + std::to_string(with_bias);
  test::check_close(c, want, 1e-5, 1e-30, what, &scale);
}

const Transpose kBoth[] = {Transpose::no, Transpose::yes};

}  // namespace

BOOST_AUTO_TEST_SUITE(matmul)

BOOST_AUTO_TEST_CASE(all_transposes_plain) {
  std::mt19937 rng(1);
  // Odd shapes, and the MLP 784-128-10 at batch 64: forward (x W^T), dW (dy^T x), dx (dy W).
  const Problem shapes[] = {{7, 13, 5}, {1, 1, 1}, {64, 128, 784}, {64, 10, 128}, {128, 784, 64},
                            {10, 128, 64}, {64, 784, 128}};
  for (const Problem& pr : shapes) {
    for (Transpose ta : kBoth) {
      for (Transpose tb : kBoth) run_case(pr, ta, tb, 1.0f, 0.0f, false, rng);
    }
  }
}

BOOST_AUTO_TEST_CASE(alpha_beta_bias) {
  std::mt19937 rng(2);
  for (Transpose ta : kBoth) {
    for (Transpose tb : kBoth) {
      run_case({7, 13, 5}, ta, tb, 1.0f, 0.0f, true, rng);   // bias argument
      run_case({7, 13, 5}, ta, tb, 1.0f, 1.0f, false, rng);  // accumulate (sum post-op)
      run_case({7, 13, 5}, ta, tb, 1.0f, 1.0f, true, rng);
      run_case({7, 13, 5}, ta, tb, 0.5f, 0.0f, false, rng);  // output scale
      run_case({7, 13, 5}, ta, tb, 0.5f, 0.75f, true, rng);  // scale + sum + bias post-op
      run_case({64, 128, 784}, ta, tb, -2.0f, 1.0f, true, rng);
    }
  }
}

BOOST_AUTO_TEST_CASE(repeated_calls_use_the_new_pointers) {
  // The cached primitive is reused; each call must read and write the tensors it is given.
  std::mt19937 rng(3);
  for (int rep = 0; rep < 3; ++rep) {
    run_case({64, 128, 784}, Transpose::no, Transpose::yes, 1.0f, 0.0f, true, rng);
  }
}

BOOST_AUTO_TEST_CASE(bf16_inputs) {
  std::mt19937 rng(4);
  const std::int64_t m = 9, n = 17, k = 33;
  Tensor a32 = test::random_f32({m, k}, rng), b32 = test::random_f32({n, k}, rng);
  Tensor a = host_tensor({m, k}, DType::bf16), b = host_tensor({n, k}, DType::bf16);
  cpu().cast(a, a32);
  cpu().cast(b, b32);
  cpu().cast(a32, a);  // the reference sees exactly the rounded inputs
  cpu().cast(b32, b);
  Tensor bias = test::random_f32({n}, rng);
  std::vector<double> want(static_cast<std::size_t>(m * n)), scale(want.size());
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = bias.data_as<float>()[j], mag = std::abs(s);
      for (std::int64_t q = 0; q < k; ++q) {
        const double prod = double(a32.data_as<float>()[i * k + q]) * b32.data_as<float>()[j * k + q];
        s += prod;
        mag += std::abs(prod);
      }
      want[static_cast<std::size_t>(i * n + j)] = s;
      scale[static_cast<std::size_t>(i * n + j)] = mag;
    }
  }
  Tensor c = test::poisoned({m, n});
  cpu().matmul(c, a, Transpose::no, b, Transpose::yes, 1.0f, 0.0f, bias);
  test::check_close(c, want, 1e-5, 1e-30, "bf16 x bf16 -> f32", &scale);

  Tensor c16 = test::poisoned({m, n}, DType::bf16);
  cpu().matmul(c16, a, Transpose::no, b, Transpose::yes, 1.0f, 0.0f, bias);
  Tensor back = test::poisoned({m, n});
  cpu().cast(back, c16);
  test::check_close(back, want, 1.0 / 128, 1e-5, "bf16 x bf16 -> bf16", &scale);
}

BOOST_AUTO_TEST_CASE(shape_and_dtype_errors) {
  Tensor a = host_tensor({3, 4}, DType::f32), b = host_tensor({5, 6}, DType::f32);
  Tensor c = host_tensor({3, 6}, DType::f32);
  std::string msg = test::error_text<BackendError>(
      [&] { cpu().matmul(c, a, Transpose::no, b, Transpose::no, 1, 0, Tensor()); });
  BOOST_TEST(msg.find("cpu backend, matmul:") != std::string::npos, msg);
  BOOST_TEST(msg.find("op(a) of a f32(3, 4) (transposed: false) is (3, 4) but op(b) of b "
                      "f32(5, 6) (transposed: false) is (5, 6)") != std::string::npos, msg);

  Tensor b2 = host_tensor({4, 6}, DType::f32), c2 = host_tensor({3, 7}, DType::f32);
  msg = test::error_text<BackendError>(
      [&] { cpu().matmul(c2, a, Transpose::no, b2, Transpose::no, 1, 0, Tensor()); });
  BOOST_TEST(msg.find("c is f32(3, 7) but must have shape (3, 6)") != std::string::npos, msg);

  Tensor bias = host_tensor({5}, DType::f32);
  msg = test::error_text<BackendError>(
      [&] { cpu().matmul(c, a, Transpose::no, b2, Transpose::no, 1, 0, bias); });
  BOOST_TEST(msg.find("bias is f32(5) but must have shape (6)") != std::string::npos, msg);

  Tensor ai = host_tensor({3, 4}, DType::i32);
  msg = test::error_text<BackendError>(
      [&] { cpu().matmul(c, ai, Transpose::no, b2, Transpose::no, 1, 0, Tensor()); });
  BOOST_TEST(msg.find("a is i32(3, 4) but must be f32, bf16 or f16") != std::string::npos, msg);

  Tensor bb = host_tensor({4, 6}, DType::bf16);
  msg = test::error_text<BackendError>(
      [&] { cpu().matmul(c, a, Transpose::no, bb, Transpose::no, 1, 0, Tensor()); });
  BOOST_TEST(msg.find("b is bf16(4, 6) but must be f32") != std::string::npos, msg);

  msg = test::error_text<BackendError>(
      [&] { cpu().matmul(c, a, Transpose::no, Tensor(), Transpose::no, 1, 0, Tensor()); });
  BOOST_TEST(msg.find("b is undefined but is required") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bias_grad)

BOOST_AUTO_TEST_CASE(sums_rows_overwrite_and_accumulate) {
  std::mt19937 rng(5);
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{7, 13}, {64, 128}, {64, 10}, {300, 1000}};
  for (auto [m, n] : shapes) {
    Tensor dy = test::random_f32({m, n}, rng);
    std::vector<double> sum(static_cast<std::size_t>(n), 0.0), mag(sum.size(), 0.0);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        sum[static_cast<std::size_t>(j)] += dy.data_as<float>()[i * n + j];
        mag[static_cast<std::size_t>(j)] += std::abs(dy.data_as<float>()[i * n + j]);
      }
    }
    Tensor db = test::poisoned({n});
    cpu().bias_grad(db, dy, Accumulate::no);
    test::check_close(db, sum, 1e-5, 1e-30, "bias_grad overwrite " + std::to_string(m), &mag);

    Tensor acc = test::random_f32({n}, rng);
    std::vector<double> want = sum, scale = mag;
    for (std::int64_t j = 0; j < n; ++j) {
      want[static_cast<std::size_t>(j)] += acc.data_as<float>()[j];
      scale[static_cast<std::size_t>(j)] += std::abs(acc.data_as<float>()[j]);
    }
    cpu().bias_grad(acc, dy, Accumulate::yes);
    test::check_close(acc, want, 1e-5, 1e-30, "bias_grad accumulate " + std::to_string(m), &scale);
  }
}

BOOST_AUTO_TEST_CASE(shape_error) {
  Tensor dy = host_tensor({4, 6}, DType::f32), db = host_tensor({4}, DType::f32);
  const std::string msg =
      test::error_text<BackendError>([&] { cpu().bias_grad(db, dy, Accumulate::yes); });
  BOOST_TEST(msg.find("cpu backend, bias_grad: db is f32(4) but must have shape (6)") !=
             std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()
