// Optimizers made by kiln::train::make_optimizer on a two-parameter ParameterStore (w with
// weight decay, b flagged kParamNoWeightDecay) on the cpu backend: values after one and two
// steps against numbers worked out by hand (PyTorch's formulas, in the comments) and against
// a double-precision reference of the same formulas; parameters excluded by [model] freeze left
// alone; foreign and bad keys rejected.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/train/optimizer.hpp"
#include "train_fixture.hpp"

namespace {

using kiln::test::core_table;
using kiln::test::cpu;
using kiln::test::read;
using kiln::test::write;

const std::vector<double> kW0 = {1.0, -2.0, 0.5};
const std::vector<double> kB0 = {0.3, -0.1};
const std::vector<double> kGw = {0.1, 0.2, -0.3};
const std::vector<double> kGb = {0.5, -0.5};

/// Two parameters in one arena: w (3) decays, b (2) does not.
struct TwoParams {
  kiln::nn::ParameterStore store;
  std::size_t w, b;
  TwoParams() {
    w = store.declare("w", {3}, kiln::nn::Init::zeros());
    b = store.declare("b", {2}, kiln::nn::Init::zeros(), kiln::kParamNoWeightDecay);
    store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 1);
    write(store[w].value, kW0);
    write(store[b].value, kB0);
  }
  void set_grads() {
    write(store[w].grad, kGw);
    write(store[b].grad, kGb);
  }
  std::vector<double> wv() { return read(store[w].value); }
  std::vector<double> bv() { return read(store[b].value); }
  /// Two steps with the same gradients; returns {w, b} after each step.
  std::vector<std::vector<double>> two_steps(kiln::train::Optimizer& opt, float lr) {
    std::vector<std::vector<double>> out;
    for (int s = 0; s < 2; ++s) {
      set_grads();
      opt.step(cpu(), store.parameters(), lr);
      cpu().synchronize();
      out.push_back(wv());
      out.push_back(bv());
    }
    return out;
  }
};

void check_values(const std::string& what, const std::vector<double>& got, const std::vector<double>& want) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(std::abs(got[i] - want[i]) <= 1e-6 + 2e-6 * std::abs(want[i]),
               what << "[" << i << "] got " << got[i] << " want " << want[i]);
  }
}

// PyTorch's SGD in double: buf starts as a clone of the first (decayed) gradient.
struct SgdRef {
  double lr, momentum, dampening, wd;
  bool nesterov;
  std::vector<double> p, buf;
  int steps = 0;
  void step(const std::vector<double>& grad) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + wd * p[i];
      if (momentum != 0) {
        buf[i] = steps == 0 ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
    ++steps;
  }
};

// PyTorch's Adam / AdamW in double.
struct AdamRef {
  double lr, b1, b2, eps, wd;
  bool decoupled;
  std::vector<double> p, m, v;
  int t = 0;
  void step(const std::vector<double>& grad) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      p[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

BOOST_AUTO_TEST_CASE(sgd_momentum_weight_decay_skips_flagged_param) {
  TwoParams tp;
  auto opt = kiln::train::make_optimizer(
      "sgd", core_table("optimizer", "lr = 0.1\nmomentum = 0.9\nweight_decay = 0.01", kiln::train::optimizer_schema("sgd")));
  const auto r = tp.two_steps(*opt, 0.1f);
  // w[0] = 1, g = 0.1:  g' = 0.1 + 0.01 * 1 = 0.11; buf = 0.11; p = 1 - 0.011 = 0.989
  //   step 2: g' = 0.1 + 0.00989 = 0.10989; buf = 0.099 + 0.10989 = 0.20889; p = 0.968111
  // b[0] = 0.3, g = 0.5, no decay: buf = 0.5; p = 0.25; step 2: buf = 0.95; p = 0.155
  BOOST_TEST(r[0][0] == 0.989, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r[2][0] == 0.968111, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r[1][0] == 0.25, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r[3][0] == 0.155, boost::test_tools::tolerance(1e-6));

  SgdRef w{0.1, 0.9, 0.0, 0.01, false, kW0, {}}, b{0.1, 0.9, 0.0, 0.0, false, kB0, {}};
  for (int s = 0; s < 2; ++s) {
    w.step(kGw);
    b.step(kGb);
    check_values("sgd w step " + std::to_string(s + 1), r[2 * s], w.p);
    check_values("sgd b step " + std::to_string(s + 1), r[2 * s + 1], b.p);
  }
  BOOST_TEST(opt->steps() == 2);
  BOOST_TEST(opt->describe() == "sgd(momentum=0.9, dampening=0, nesterov=false, weight_decay=0.01)");
}

BOOST_AUTO_TEST_CASE(sgd_nesterov) {
  TwoParams tp;
  auto opt = kiln::train::make_optimizer(
      "sgd", core_table("optimizer", "lr = 0.1\nmomentum = 0.9\nnesterov = true", kiln::train::optimizer_schema("sgd")));
  const auto r = tp.two_steps(*opt, 0.1f);
  // w[0] = 1, g = 0.1: buf = 0.1; g'' = 0.1 + 0.09 = 0.19; p = 0.981
  //   step 2: buf = 0.09 + 0.1 = 0.19; g'' = 0.1 + 0.171 = 0.271; p = 0.981 - 0.0271 = 0.9539
  BOOST_TEST(r[0][0] == 0.981, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r[2][0] == 0.9539, boost::test_tools::tolerance(1e-6));
  SgdRef w{0.1, 0.9, 0.0, 0.0, true, kW0, {}}, b{0.1, 0.9, 0.0, 0.0, true, kB0, {}};
  for (int s = 0; s < 2; ++s) {
    w.step(kGw);
    b.step(kGb);
    check_values("nesterov w", r[2 * s], w.p);
    check_values("nesterov b", r[2 * s + 1], b.p);
  }
}

BOOST_AUTO_TEST_CASE(sgd_plain_uses_the_lr_argument) {
  TwoParams tp;
  auto opt = kiln::train::make_optimizer(
      "sgd", core_table("optimizer", "lr = 0.1", kiln::train::optimizer_schema("sgd")));
  tp.set_grads();
  opt->step(cpu(), tp.store.parameters(), 0.5f);  // the schedule's lr wins over the table's
  check_values("sgd w", tp.wv(), {1.0 - 0.05, -2.0 - 0.1, 0.5 + 0.15});
  check_values("sgd b", tp.bv(), {0.3 - 0.25, -0.1 + 0.25});
}

// PyTorch seeds the momentum buffer with the first gradient (buf = g), so with dampening the
// first step moves by lr * g, not lr * (1 - dampening) * g.
BOOST_AUTO_TEST_CASE(sgd_dampening_first_step_matches_pytorch) {
  TwoParams tp;
  auto opt = kiln::train::make_optimizer(
      "sgd", core_table("optimizer", "lr = 0.1\nmomentum = 0.9\ndampening = 0.5", kiln::train::optimizer_schema("sgd")));
  const auto r = tp.two_steps(*opt, 0.1f);
  // w[0] = 1, g = 0.1: buf = 0.1; p = 0.99.  step 2: buf = 0.09 + 0.05 = 0.14; p = 0.976
  SgdRef w{0.1, 0.9, 0.5, 0.0, false, kW0, {}};
  w.step(kGw);
  BOOST_TEST(r[0][0] == 0.99, boost::test_tools::tolerance(1e-6));
  check_values("dampened sgd w step 1", r[0], w.p);
  w.step(kGw);
  BOOST_TEST(r[2][0] == 0.976, boost::test_tools::tolerance(1e-6));
  check_values("dampened sgd w step 2", r[2], w.p);
}

BOOST_AUTO_TEST_CASE(adam_bias_correction_and_coupled_decay) {
  TwoParams tp;
  auto opt = kiln::train::make_optimizer(
      "adam", core_table("optimizer", "lr = 0.01\nweight_decay = 0.1", kiln::train::optimizer_schema("adam")));
  const auto r = tp.two_steps(*opt, 0.01f);
  // Step 1 with bias correction: m^ = g, v^ = g^2, so every element moves by lr * sign(g'):
  //   w = [1 - 0.01, -2, 0.5 + 0.01]   (g' = g + 0.1 p = [0.2, 0.0, -0.25]; w[1]: g' = 0
  //   exactly, so it stays at -2), b = [0.3 - 0.01, -0.1 + 0.01] (no decay)
  check_values("adam w step 1", r[0], {0.99, -2.0, 0.51});
  check_values("adam b step 1", r[1], {0.29, -0.09});
  // w[0] step 2: g' = 0.1 + 0.099 = 0.199; m = 0.0379; v = 7.9561e-5;
  //   m^ = 0.0379 / 0.19 = 0.199474; sqrt(v^) = sqrt(7.9561e-5 / 0.001999) = 0.199500
  //   p = 0.99 - 0.01 * 0.199474 / 0.199500 = 0.980001
  BOOST_TEST(r[2][0] == 0.980001, boost::test_tools::tolerance(2e-6));
  AdamRef w{0.01, 0.9, 0.999, 1e-8, 0.1, false, kW0, {}, {}}, b{0.01, 0.9, 0.999, 1e-8, 0.0, false, kB0, {}, {}};
  for (int s = 0; s < 2; ++s) {
    w.step(kGw);
    b.step(kGb);
    check_values("adam w", r[2 * s], w.p);
    check_values("adam b", r[2 * s + 1], b.p);
  }
  BOOST_TEST(opt->describe() == "adam(beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.1)");
}

BOOST_AUTO_TEST_CASE(adamw_decoupled_decay) {
  TwoParams tp;
  auto opt = kiln::train::make_optimizer(
      "adamw", core_table("optimizer", "lr = 0.01\nweight_decay = 0.1", kiln::train::optimizer_schema("adamw")));
  const auto r = tp.two_steps(*opt, 0.01f);
  // Step 1: p *= 1 - 0.01 * 0.1 = 0.999, then moves by lr * sign(g) (decay not in g):
  //   w = [0.999 - 0.01, -1.998 - 0.01, 0.4995 + 0.01]; b undecayed: [0.29, -0.09]
  check_values("adamw w step 1", r[0], {0.989, -2.008, 0.5095});
  check_values("adamw b step 1", r[1], {0.29, -0.09});
  AdamRef w{0.01, 0.9, 0.999, 1e-8, 0.1, true, kW0, {}, {}}, b{0.01, 0.9, 0.999, 1e-8, 0.0, true, kB0, {}, {}};
  for (int s = 0; s < 2; ++s) {
    w.step(kGw);
    b.step(kGb);
    check_values("adamw w", r[2 * s], w.p);
    check_values("adamw b", r[2 * s + 1], b.p);
  }
  BOOST_TEST(opt->describe().rfind("adamw(", 0) == 0);
}

BOOST_AUTO_TEST_CASE(gaps_between_parameters_stay_zero) {
  TwoParams tp;
  auto opt = kiln::train::make_optimizer(
      "adamw", core_table("optimizer", "lr = 0.01\nweight_decay = 0.1", kiln::train::optimizer_schema("adamw")));
  tp.two_steps(*opt, 0.01f);
  const auto arena = read(tp.store.value_arena());
  for (std::int64_t k = 3; k < tp.store.offset(tp.b); ++k) BOOST_TEST(arena[k] == 0.0, "gap " << k);
  for (std::int64_t k = tp.store.offset(tp.b) + 2; k < tp.store.arena_elements(); ++k) BOOST_TEST(arena[k] == 0.0);
}

// [model] freeze: an excluded parameter between two trained ones keeps its value under momentum
// and weight decay (a segment spanning it would move it), has no state, and the others step
// exactly as without it.
BOOST_AUTO_TEST_CASE(excluded_parameters_are_left_alone_and_have_no_state) {
  kiln::nn::ParameterStore store;
  const std::size_t a = store.declare("a", {3}, kiln::nn::Init::zeros());
  const std::size_t frozen = store.declare("frozen", {4}, kiln::nn::Init::zeros());
  const std::size_t c = store.declare("c", {3}, kiln::nn::Init::zeros());
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 1);
  const std::vector<double> frozen0 = {1.0, -1.0, 2.0, -2.0};
  write(store[a].value, kW0);
  write(store[frozen].value, frozen0);
  write(store[c].value, kW0);
  auto opt = kiln::train::make_optimizer(
      "sgd", core_table("optimizer", "lr = 0.1\nmomentum = 0.9\nweight_decay = 0.01", kiln::train::optimizer_schema("sgd")));
  opt->exclude({"frozen"});
  SgdRef ref{0.1, 0.9, 0.0, 0.01, false, kW0, {}};
  for (int s = 0; s < 2; ++s) {
    write(store[a].grad, kGw);
    write(store[frozen].grad, {0.5, 0.5, 0.5, 0.5});
    write(store[c].grad, kGw);
    opt->step(cpu(), store.parameters(), 0.1f);
    cpu().synchronize();
    ref.step(kGw);
    check_values("a", read(store[a].value), ref.p);
    check_values("c", read(store[c].value), ref.p);
    BOOST_TEST(read(store[frozen].value) == frozen0, boost::test_tools::per_element());
  }
  std::vector<std::string> names;
  for (const auto& [name, t] : opt->state_views(cpu(), store.parameters())) names.push_back(name);
  BOOST_TEST(names == (std::vector<std::string>{"momentum_buffer.a", "momentum_buffer.c"}),
             boost::test_tools::per_element());
  BOOST_TEST(kiln::test::error_text<std::logic_error>([&] { opt->exclude({}); }).find("after") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(foreign_and_bad_keys_are_rejected) {
  using kiln::test::error_text;
  auto make = [](const std::string& type, const std::string& body) {
    return kiln::train::make_optimizer(type, core_table("optimizer", body, kiln::train::optimizer_schema(type)));
  };
  // A key of another optimizer is an unknown key of this one, with its location.
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("adam", "lr = 0.01\nmomentum = 0.9"); })
                 .find("test.toml:3:1: unknown key 'momentum' in [optimizer]") == 0);
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("adamw", "nesterov = true"); })
                 .find("unknown key 'nesterov' in [optimizer]") != std::string::npos);
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("sgd", "beta2 = 0.99"); })
                 .find("unknown key 'beta2' in [optimizer]") != std::string::npos);
  BOOST_TEST(error_text<kiln::ConfigError>([&] { kiln::train::optimizer_schema("rmsprop"); }) ==
             "optimizer.type = 'rmsprop' is not one of sgd, adam, adamw");
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("sgd", "lr = 0.0"); })
                 .find("test.toml:2:6: [optimizer] lr = 0 is out of range: it must be > 0") == 0);
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("adam", "lr = inf"); }) ==
             "test.toml:2:6: [optimizer] lr = inf is out of range: it must be a finite number");
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("adam", "eps = 0.0"); }) ==
             "test.toml:2:7: [optimizer] eps = 0 is out of range: it must be > 0");
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("adam", "beta1 = 1.0"); })
                 .find("test.toml:2:9: [optimizer] beta1 = 1 is out of range: it must be in [0, 1)") == 0);
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("sgd", "nesterov = true"); })
                 .find("needs momentum > 0") != std::string::npos);
  BOOST_TEST(error_text<kiln::ConfigError>([&] { make("sgd", "weight_decay = -1.0"); }) ==
             "test.toml:2:16: [optimizer] weight_decay = -1 is out of range: it must be >= 0");
}

}  // namespace
