// Activations (forward, backward, Accumulate::yes), add_relu_forward, add, scale, check_finite,
// against double references. Bound: 1e-5 relative + 1e-6 absolute (f32 libm functions).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

double act_ref(Activation a, double x) {
  switch (a) {
    case Activation::relu: return x > 0 ? x : 0;
    case Activation::tanh: return std::tanh(x);
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::gelu: {
      const double c = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
    }
  }
  return 0;
}

/// Derivative by central differences in double (step small enough for 1e-6 accuracy).
double grad_ref(Activation a, double x) {
  if (a == Activation::relu) return x > 0 ? 1.0 : 0.0;
  const double h = 1e-6;
  return (act_ref(a, x + h) - act_ref(a, x - h)) / (2 * h);
}

const Activation kActs[] = {Activation::relu, Activation::tanh, Activation::sigmoid,
                            Activation::gelu};

}  // namespace

BOOST_AUTO_TEST_SUITE(elementwise)

BOOST_AUTO_TEST_CASE(activations_forward_backward) {
  std::mt19937 rng(11);
  for (std::int64_t n : {std::int64_t{1000}, std::int64_t{100003}}) {  // serial and parallel
    for (Activation act : kActs) {
      const std::string name(activation_name(act));
      Tensor x = test::random_f32({n}, rng, -4.0f, 4.0f);
      Tensor y = test::poisoned({n});
      cpu().activation_forward(y, x, act);
      std::vector<double> want_y, want_dx, want_acc;
      Tensor dy = test::random_f32({n}, rng);
      Tensor prior = test::random_f32({n}, rng);
      for (std::int64_t i = 0; i < n; ++i) {
        const double xi = x.data_as<float>()[i];
        want_y.push_back(act_ref(act, xi));
        want_dx.push_back(dy.data_as<float>()[i] * grad_ref(act, xi));
        want_acc.push_back(want_dx.back() + prior.data_as<float>()[i]);
      }
      test::check_close(y, want_y, 1e-5, 1e-6, name + " forward");

      Tensor dx = test::poisoned({n});
      cpu().activation_backward(dx, dy, x, y, act, Accumulate::no);
      test::check_close(dx, want_dx, 1e-5, 2e-6, name + " backward");
      cpu().activation_backward(prior, dy, x, y, act, Accumulate::yes);
      test::check_close(prior, want_acc, 1e-5, 2e-6, name + " backward accumulate");
    }
  }
}

BOOST_AUTO_TEST_CASE(in_place_forward_and_backward_without_x) {
  std::mt19937 rng(12);
  Tensor x = test::random_f32({257}, rng, -3.0f, 3.0f);
  std::vector<double> xs = test::values(x);
  cpu().activation_forward(x, x, Activation::tanh);  // y aliases x
  Tensor dy = test::random_f32({257}, rng);
  Tensor dx = test::poisoned({257});
  cpu().activation_backward(dx, dy, Tensor(), x, Activation::tanh, Accumulate::no);
  std::vector<double> want;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    want.push_back(dy.data_as<float>()[i] * (1.0 - std::pow(std::tanh(xs[i]), 2)));
  }
  test::check_close(dx, want, 1e-5, 1e-6, "tanh backward from y only");

  const std::string msg = test::error_text<BackendError>([&] {
    cpu().activation_backward(dx, dy, Tensor(), x, Activation::gelu, Accumulate::no);
  });
  BOOST_TEST(msg.find("x (gelu's backward reads x) is undefined") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(relu_propagates_nan) {
  Tensor x = test::f32_tensor({3}, {-1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f});
  Tensor y = test::poisoned({3});
  y.data_as<float>()[1] = 0.0f;
  cpu().activation_forward(y, x, Activation::relu);
  BOOST_TEST(y.data_as<float>()[0] == 0.0f);
  BOOST_TEST(std::isnan(y.data_as<float>()[1]));
  BOOST_TEST(y.data_as<float>()[2] == 2.0f);
}

BOOST_AUTO_TEST_CASE(add_relu_add_scale) {
  std::mt19937 rng(13);
  for (std::int64_t n : {std::int64_t{999}, std::int64_t{70000}}) {
    Tensor x = test::random_f32({n}, rng), r = test::random_f32({n}, rng);
    Tensor y = test::poisoned({n}), c = test::poisoned({n});
    std::vector<double> want_relu, want_add, want_scaled;
    for (std::int64_t i = 0; i < n; ++i) {
      const double s = double(x.data_as<float>()[i]) + r.data_as<float>()[i];
      want_relu.push_back(s > 0 ? s : 0);
      want_add.push_back(s);
      want_scaled.push_back(x.data_as<float>()[i] * double(-0.375f));
    }
    cpu().add_relu_forward(y, x, r);
    test::check_close(y, want_relu, 1e-6, 0, "add_relu_forward");
    cpu().add(c, x, r);
    test::check_close(c, want_add, 1e-6, 0, "add");
    cpu().add(x, x, r);  // c aliases a
    test::check_close(x, want_add, 1e-6, 0, "add in place");
    Tensor t = test::poisoned({n});
    for (std::int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = static_cast<float>(want_scaled[i] / -0.375);
    cpu().scale(t, -0.375f);
    test::check_close(t, want_scaled, 1e-6, 0, "scale");
  }
  Tensor a = host_tensor({2, 3}, DType::f32), b = host_tensor({3, 2}, DType::f32);
  const std::string msg = test::error_text<BackendError>([&] { cpu().add(a, a, b); });
  BOOST_TEST(msg.find("cpu backend, add: b is f32(3, 2) but must have the shape of c f32(2, 3)") !=
             std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(check_finite_flags) {
  std::mt19937 rng(14);
  Tensor flag = host_tensor({1}, DType::i32);
  for (std::int64_t n : {std::int64_t{100}, std::int64_t{50000}}) {
    Tensor t = test::random_f32({n}, rng, -1e30f, 1e30f);
    *flag.data_as<std::int32_t>() = 0;
    cpu().check_finite(flag, t);
    BOOST_TEST(*flag.data_as<std::int32_t>() == 0);
    t.data_as<float>()[n - 1] = std::numeric_limits<float>::quiet_NaN();
    cpu().check_finite(flag, t);
    BOOST_TEST(*flag.data_as<std::int32_t>() == 1);
    t.data_as<float>()[n - 1] = 0.0f;
    t.data_as<float>()[n / 2] = -std::numeric_limits<float>::infinity();
    *flag.data_as<std::int32_t>() = 0;
    cpu().check_finite(flag, t);
    BOOST_TEST(*flag.data_as<std::int32_t>() == 1);
    // A finite tensor leaves an already raised flag raised (flags are shared across tensors).
    t.data_as<float>()[n / 2] = 1.0f;
    cpu().check_finite(flag, t);
    BOOST_TEST(*flag.data_as<std::int32_t>() == 1);
  }
  for (DType d : {DType::bf16, DType::f16}) {
    Tensor src = test::f32_tensor({4}, {1.0f, -2.0f, 3.0f, 0.5f});
    Tensor h = host_tensor({4}, d);
    cpu().cast(h, src);
    *flag.data_as<std::int32_t>() = 0;
    cpu().check_finite(flag, h);
    BOOST_TEST(*flag.data_as<std::int32_t>() == 0);
    src.data_as<float>()[2] = std::numeric_limits<float>::infinity();
    cpu().cast(h, src);
    cpu().check_finite(flag, h);
    BOOST_TEST(*flag.data_as<std::int32_t>() == 1);
  }
  Tensor big_flag = host_tensor({2}, DType::i32);
  const std::string msg = test::error_text<BackendError>(
      [&] { cpu().check_finite(big_flag, host_tensor({3}, DType::f32)); });
  BOOST_TEST(msg.find("flag is i32(2) but must have one element") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()
