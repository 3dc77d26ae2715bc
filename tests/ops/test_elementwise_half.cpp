// The element-wise ops in bf16 and f16 storage (activations, add_relu, add, scale, dropout,
// bias_grad with an f32 output): each result must be the f32 op on the widened inputs, rounded
// once to the storage type (bound: half an ulp plus f32 libm error, 2^-8 bf16 / 2^-11 f16).
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

const DType kHalves[] = {DType::bf16, DType::f16};

/// Absolute slack for results in f16's subnormal range (its quantum there is 2^-24).
constexpr double kSubnormal = 6e-8;

double rtol_of(DType d) { return d == DType::bf16 ? 1.0 / 256 + 1e-6 : 1.0 / 2048 + 1e-6; }

/// The f32 op's result on f32 copies of the inputs (the reference for the half-storage op).
std::vector<double> f32_result(const Tensor& t) { return test::values(t); }

}  // namespace

BOOST_AUTO_TEST_SUITE(elementwise_half)

BOOST_AUTO_TEST_CASE(activations_match_f32_on_rounded_inputs) {
  std::mt19937 rng(61);
  for (DType dt : kHalves) {
    for (std::int64_t n : {std::int64_t{999}, std::int64_t{40001}}) {
      for (Activation act : {Activation::relu, Activation::tanh, Activation::sigmoid,
                             Activation::gelu}) {
        const std::string name = std::string(dtype_name(dt)) + " " + std::string(activation_name(act));
        const Tensor x = test::rounded(test::random_f32({n}, rng, -3, 3), dt);
        const Tensor dy = test::rounded(test::random_f32({n}, rng), dt);
        Tensor y32 = test::poisoned({n});
        cpu().activation_forward(y32, x, act);
        Tensor y = test::poisoned({n}, dt);
        cpu().activation_forward(y, test::to_dtype(x, dt), act);
        test::check_close(y, f32_result(y32), rtol_of(dt), 1e-6, name + " forward");

        // The backward reads the stored (rounded) y, as it will in a model.
        const Tensor y_used = test::to_f32(y);
        Tensor dx32 = test::poisoned({n});
        cpu().activation_backward(dx32, dy, x, y_used, act, Accumulate::no);
        Tensor dx = test::poisoned({n}, dt);
        cpu().activation_backward(dx, test::to_dtype(dy, dt), test::to_dtype(x, dt), y, act,
                                  Accumulate::no);
        test::check_close(dx, f32_result(dx32), rtol_of(dt), 1e-6, name + " backward");

        const Tensor prior = test::rounded(test::random_f32({n}, rng), dt);
        Tensor acc = test::to_dtype(prior, dt);
        cpu().activation_backward(acc, test::to_dtype(dy, dt), test::to_dtype(x, dt), y, act,
                                  Accumulate::yes);
        std::vector<double> want = f32_result(dx32), scale(n);
        for (std::int64_t i = 0; i < n; ++i) {
          want[i] += prior.data_as<float>()[i];
          scale[i] = std::abs(want[i]) + std::abs(dx32.data_as<float>()[i]);
        }
        test::check_close(acc, want, rtol_of(dt), 1e-6, name + " backward accumulate", &scale);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(add_relu_add_scale) {
  std::mt19937 rng(62);
  for (DType dt : kHalves) {
    const std::int64_t n = 20011;
    const Tensor a = test::rounded(test::random_f32({n}, rng), dt);
    const Tensor b = test::rounded(test::random_f32({n}, rng), dt);
    std::vector<double> sum(n), relu(n), scaled(n);
    for (std::int64_t i = 0; i < n; ++i) {
      sum[i] = static_cast<double>(a.data_as<float>()[i]) + b.data_as<float>()[i];
      relu[i] = sum[i] > 0 ? sum[i] : 0;
      scaled[i] = a.data_as<float>()[i] * -0.375;
    }
    const std::string name(dtype_name(dt));
    Tensor y = test::poisoned({n}, dt);
    cpu().add_relu_forward(y, test::to_dtype(a, dt), test::to_dtype(b, dt));
    test::check_close(y, relu, rtol_of(dt), kSubnormal, name + " add_relu_forward");
    Tensor c = test::poisoned({n}, dt);
    cpu().add(c, test::to_dtype(a, dt), test::to_dtype(b, dt));
    test::check_close(c, sum, rtol_of(dt), kSubnormal, name + " add");
    Tensor s = test::to_dtype(a, dt);
    cpu().scale(s, -0.375f);
    test::check_close(s, scaled, rtol_of(dt), kSubnormal, name + " scale");
  }
  Tensor f = host_tensor({4}, DType::f32), h = host_tensor({4}, DType::bf16);
  const std::string msg = test::error_text<BackendError>([&] { cpu().add(f, h, f); });
  BOOST_TEST(msg.find("cpu backend, add: a is bf16(4) but must be f32") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(dropout_has_the_f32_mask) {
  std::mt19937 rng(63);
  const std::int64_t n = 30000;
  const Tensor x = test::rounded(test::random_f32({n}, rng), DType::bf16);
  Tensor y32 = test::poisoned({n}), m32 = test::poisoned({n}, DType::u8);
  cpu().dropout_forward(y32, m32, x, 0.25f, 77);
  for (DType dt : kHalves) {
    Tensor y = test::poisoned({n}, dt), m = test::poisoned({n}, DType::u8);
    cpu().dropout_forward(y, m, test::to_dtype(x, dt), 0.25f, 77);
    BOOST_TEST(std::memcmp(m.data(), m32.data(), n) == 0);
    test::check_close(y, test::values(y32), rtol_of(dt), kSubnormal, std::string(dtype_name(dt)) + " dropout forward");
    Tensor dx = test::poisoned({n}, dt);
    cpu().dropout_backward(dx, test::to_dtype(x, dt), m, 0.25f);
    test::check_close(dx, test::values(y32), rtol_of(dt), kSubnormal, std::string(dtype_name(dt)) + " dropout backward");
  }
}

BOOST_AUTO_TEST_CASE(bias_grad_half_input_f32_output) {
  std::mt19937 rng(64);
  for (DType dt : kHalves) {
    const std::int64_t m = 37, n = 600;
    const Tensor dy = test::rounded(test::random_f32({m, n}, rng), dt);
    const Tensor prior = test::random_f32({n}, rng);
    std::vector<double> want(n);
    for (std::int64_t j = 0; j < n; ++j) {
      want[j] = prior.data_as<float>()[j];
      for (std::int64_t i = 0; i < m; ++i) want[j] += dy.data_as<float>()[i * n + j];
    }
    Tensor db = prior;
    cpu().bias_grad(db, test::to_dtype(dy, dt), Accumulate::yes);
    test::check_close(db, want, 1e-5, 1e-5, std::string(dtype_name(dt)) + " bias_grad");
  }
}

BOOST_AUTO_TEST_SUITE_END()
