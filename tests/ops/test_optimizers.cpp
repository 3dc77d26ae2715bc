// sgd_update and adam_update single steps against numbers produced by PyTorch 1.13
// (torch.optim.SGD / Adam / AdamW with the state buffers set to the values below, one .step()).
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

const std::vector<float> kParam = {1.0f, -2.0f, 0.5f};

void check3(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  test::check_close(t, want, 1e-6, 1e-8, what);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizers)

BOOST_AUTO_TEST_CASE(sgd_variants) {
  const std::vector<float> grad = {0.5f, 0.25f, -0.1f}, buf0 = {0.1f, -0.2f, 0.3f};
  {  // plain SGD with weight decay, no momentum buffer at all
    Tensor p = test::f32_tensor({3}, kParam), g = test::f32_tensor({3}, grad);
    cpu().sgd_update(p, Tensor(), g, SgdStep{0.1f, 0.0f, 0.0f, 0.01f});
    check3(p, {0.949000001, -2.023, 0.509500027}, "sgd wd");
  }
  {  // momentum 0.9, weight decay 0.01
    Tensor p = test::f32_tensor({3}, kParam), g = test::f32_tensor({3}, grad);
    Tensor b = test::f32_tensor({3}, buf0);
    cpu().sgd_update(p, b, g, SgdStep{0.1f, 0.9f, 0.0f, 0.01f});
    check3(p, {0.939999998, -2.00500011, 0.482499987}, "sgd momentum param");
    check3(b, {0.599999964, 0.0500000119, 0.175000012}, "sgd momentum buffer");
  }
  {  // nesterov
    Tensor p = test::f32_tensor({3}, kParam), g = test::f32_tensor({3}, grad);
    Tensor b = test::f32_tensor({3}, buf0);
    cpu().sgd_update(p, b, g, SgdStep{0.1f, 0.9f, 0.0f, 0.01f, SgdStep::Nesterov::yes});
    check3(p, {0.894999981, -2.02749991, 0.493750006}, "sgd nesterov param");
    check3(b, {0.599999964, 0.0500000119, 0.175000012}, "sgd nesterov buffer");
  }
  {  // dampening 0.5
    Tensor p = test::f32_tensor({3}, kParam), g = test::f32_tensor({3}, grad);
    Tensor b = test::f32_tensor({3}, buf0);
    cpu().sgd_update(p, b, g, SgdStep{0.1f, 0.9f, 0.5f, 0.0f});
    check3(p, {0.966000021, -1.99450004, 0.477999985}, "sgd dampening param");
    check3(b, {0.340000004, -0.0549999923, 0.220000014}, "sgd dampening buffer");
  }
  Tensor p = test::f32_tensor({3}, kParam), g = test::f32_tensor({3}, grad);
  const std::string msg = test::error_text<BackendError>(
      [&] { cpu().sgd_update(p, Tensor(), g, SgdStep{0.1f, 0.9f}); });
  BOOST_TEST(msg.find("momentum (required when momentum != 0) is undefined") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(adam_and_adamw) {
  const std::vector<float> grad = {0.5f, -0.25f, 0.1f};
  const std::vector<float> m0 = {0.01f, 0.02f, -0.03f}, v0 = {0.001f, 0.002f, 0.0005f};
  struct Case {
    const char* name;
    float wd;
    AdamStep::Decay decay;
    std::vector<double> p, m, v;
  };
  const Case cases[] = {
      {"adam", 0.0f, AdamStep::Decay::coupled,
       {0.996627569, -1.99968851, 0.501521409}, {0.0590000004, -0.00700000115, -0.0169999991},
       {0.00124900008, 0.00206049997, 0.000509500038}},
      {"adam wd", 0.1f, AdamStep::Decay::coupled,
       {0.99621892, -1.99883723, 0.501061022}, {0.0690000057, -0.0270000007, -0.0119999982},
       {0.0013590001, 0.00220050011, 0.000522000017}},
      {"adamw", 0.1f, AdamStep::Decay::decoupled,
       {0.995627582, -1.99768853, 0.501021445}, {0.0590000004, -0.00700000115, -0.0169999991},
       {0.00124900008, 0.00206049997, 0.000509500038}},
  };
  for (const Case& c : cases) {
    Tensor p = test::f32_tensor({3}, kParam), g = test::f32_tensor({3}, grad);
    Tensor m = test::f32_tensor({3}, m0), v = test::f32_tensor({3}, v0);
    AdamStep step;
    step.lr = 0.01f;
    step.weight_decay = c.wd;
    step.decay = c.decay;
    step.step = 3;
    cpu().adam_update(p, m, v, g, step);
    check3(p, c.p, std::string(c.name) + " param");
    check3(m, c.m, std::string(c.name) + " m");
    check3(v, c.v, std::string(c.name) + " v");
  }
  Tensor p = test::f32_tensor({3}, kParam), g = host_tensor({4}, DType::f32);
  const std::string msg =
      test::error_text<BackendError>([&] { cpu().adam_update(p, p, p, g, AdamStep{}); });
  BOOST_TEST(msg.find("cpu backend, adam_update: grad is f32(4) but must have the shape of param "
                      "f32(3)") != std::string::npos, msg);
  AdamStep zero;
  zero.step = 0;
  const std::string step_msg =
      test::error_text<BackendError>([&] { cpu().adam_update(p, p, p, p, zero); });
  BOOST_TEST(step_msg.find("step = 0") != std::string::npos, step_msg);
}

BOOST_AUTO_TEST_SUITE_END()
