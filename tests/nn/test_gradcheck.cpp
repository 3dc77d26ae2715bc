// Finite-difference gradient checks of the core nn layers and the `mlp` model on the real cpu
// backend (Caffe's GradientChecker idea), plus the ParameterStore's layout and seeding promises.
//
// Each layer's scalar objective is L = sum(r * y) with a fixed random r, evaluated in double on
// the host from the f32 outputs, so dL/dy = r is what backward gets. Central differences use
// the step actually representable in f32 ((x+h) - (x-h) after rounding). ReLU elements inside
// the kink band |x| < h are skipped: there the difference quotient straddles the corner.
#define KILN_TEST_MODULE test_gradcheck
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"
#include "kiln/rng.hpp"
#include "nn_fixture.hpp"

namespace {

using kiln::Tensor;
using kiln::test::cpu;
using kiln::test::device_f32;
using kiln::test::read;
using kiln::test::write;

constexpr double kStep = 1e-2;
constexpr double kRtol = 1e-2;
constexpr double kAtol = 1e-3;

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// Compares `analytic` (dL/dt for every element of device tensor t) with central differences of
/// `loss` when each element of t is moved by +-kStep. `skip(i)` excludes elements (kinks).
void check_gradient(const std::string& what, const Tensor& t, const std::vector<double>& analytic,
                    const std::function<double()>& loss,
                    const std::function<bool(std::size_t)>& skip = nullptr) {
  std::vector<double> base = read(t);
  BOOST_TEST_REQUIRE(base.size() == analytic.size());
  int bad = 0, checked = 0;
  std::ostringstream report;
  for (std::size_t i = 0; i < base.size(); ++i) {
    if (skip && skip(i)) continue;
    std::vector<double> v = base;
    const double up = static_cast<float>(base[i] + kStep);
    const double down = static_cast<float>(base[i] - kStep);
    v[i] = up;
    write(t, v);
    const double l_up = loss();
    v[i] = down;
    write(t, v);
    const double l_down = loss();
    const double numeric = (l_up - l_down) / (up - down);
    const double err = std::abs(numeric - analytic[i]);
    if (!(err <= kAtol + kRtol * std::max(std::abs(numeric), std::abs(analytic[i])))) {
      if (bad < 5) report << " [" << i << "] analytic " << analytic[i] << " numeric " << numeric << ";";
      ++bad;
    }
    ++checked;
  }
  write(t, base);
  BOOST_TEST(checked > 0, what << ": no element checked");
  BOOST_TEST(bad == 0, what << ": " << bad << " of " << checked << " elements disagree:" << report.str());
}

std::vector<double> random_values(std::size_t n, std::uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  return kiln::test::uniform(n, rng, lo, hi);
}

// ---- Linear ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(linear_gradients_dx_dw_db) {
  constexpr std::int64_t B = 4, F = 7, O = 5;
  kiln::nn::ParameterStore store;
  kiln::nn::Linear fc(store, "fc", F, O);
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 11);
  fc.build(cpu(), B, kiln::DType::f32);
  const kiln::Parameter& w = store[fc.weight_index()];
  const kiln::Parameter& b = store[fc.bias_index()];
  BOOST_TEST(w.name == "fc.weight");
  BOOST_TEST(b.name == "fc.bias");
  BOOST_TEST((w.value.shape() == kiln::Shape{O, F}));
  BOOST_TEST((b.value.shape() == kiln::Shape{O}));
  BOOST_TEST(b.flags == kiln::kParamNoWeightDecay);
  BOOST_TEST(w.flags == kiln::kParamNone);

  const Tensor x = device_f32({B, F}, random_values(B * F, 1));
  const std::vector<double> r = random_values(B * O, 2);
  const Tensor dy = device_f32({B, O}, r);
  auto loss = [&] { return dot(read(fc.forward(x)), r); };

  // The forward value itself against a double reference: y = x W^T + b.
  {
    const auto xv = read(x), wv = read(w.value), bv = read(b.value), y = read(fc.forward(x));
    for (std::int64_t i = 0; i < B; ++i) {
      for (std::int64_t o = 0; o < O; ++o) {
        double want = bv[o];
        for (std::int64_t f = 0; f < F; ++f) want += xv[i * F + f] * wv[o * F + f];
        BOOST_TEST(y[i * O + o] == want, boost::test_tools::tolerance(1e-5));
      }
    }
  }

  store.zero_grads(cpu());
  fc.forward(x);
  const std::vector<double> dx = read(fc.backward(dy));
  const std::vector<double> dw = read(w.grad), db = read(b.grad);
  check_gradient("Linear dx", x, dx, loss);
  check_gradient("Linear dW", w.value, dw, loss);
  check_gradient("Linear db", b.value, db, loss);

  // Parameter gradients accumulate (+=): a second backward doubles them; dx is overwritten.
  fc.forward(x);
  const std::vector<double> dx2 = read(fc.backward(dy));
  const std::vector<double> dw2 = read(w.grad), db2 = read(b.grad);
  for (std::size_t i = 0; i < dw.size(); ++i) BOOST_TEST(dw2[i] == 2 * dw[i], boost::test_tools::tolerance(1e-5));
  for (std::size_t i = 0; i < db.size(); ++i) BOOST_TEST(db2[i] == 2 * db[i], boost::test_tools::tolerance(1e-5));
  for (std::size_t i = 0; i < dx.size(); ++i) BOOST_TEST(dx2[i] == dx[i], boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(linear_input_grad_skip_returns_undefined) {
  kiln::nn::ParameterStore store;
  kiln::nn::Linear fc(store, "first", 3, 2, kiln::nn::InputGrad::skip);
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 1);
  fc.build(cpu(), 2, kiln::DType::f32);
  fc.forward(device_f32({2, 3}, random_values(6, 3)));
  BOOST_TEST(!fc.backward(device_f32({2, 2}, {1, 2, 3, 4})).defined());
  // The parameter gradients are still produced.
  const auto db = read(store[fc.bias_index()].grad);
  BOOST_TEST(db[0] == 4.0);
  BOOST_TEST(db[1] == 6.0);
}

// ---- activations ----------------------------------------------------------------------------

void check_activation(kiln::Activation act) {
  constexpr std::int64_t B = 3, F = 9;
  kiln::nn::ActivationLayer layer(act);
  layer.build(cpu(), B, F, kiln::DType::f32);
  std::vector<double> xv = random_values(B * F, 5, -2.5, 2.5);
  xv[0] = 0.5 * kStep;  // one element inside the relu kink band, to exercise the skip
  const Tensor x = device_f32({B, F}, xv);
  const std::vector<double> r = random_values(B * F, 6);
  auto loss = [&] { return dot(read(layer.forward(x)), r); };
  layer.forward(x);
  const std::vector<double> dx = read(layer.backward(device_f32({B, F}, r)));
  std::function<bool(std::size_t)> skip;
  if (act == kiln::Activation::relu) skip = [&](std::size_t i) { return std::abs(xv[i]) < kStep; };
  check_gradient(std::string("activation ") + std::string(kiln::activation_name(act)), x, dx, loss, skip);
}

BOOST_AUTO_TEST_CASE(activation_relu_with_kink_band) { check_activation(kiln::Activation::relu); }
BOOST_AUTO_TEST_CASE(activation_tanh) { check_activation(kiln::Activation::tanh); }
BOOST_AUTO_TEST_CASE(activation_sigmoid) { check_activation(kiln::Activation::sigmoid); }
BOOST_AUTO_TEST_CASE(activation_gelu) { check_activation(kiln::Activation::gelu); }

// ---- dropout --------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(dropout_p03_fixed_mask) {
  constexpr std::int64_t B = 8, F = 16;
  constexpr float p = 0.3f;
  constexpr std::uint64_t seed = 1234;
  kiln::nn::Dropout drop(p);
  drop.build(cpu(), B, F, kiln::DType::f32);
  const std::vector<double> xv = random_values(B * F, 7);
  const Tensor x = device_f32({B, F}, xv);
  const std::vector<double> r = random_values(B * F, 8);

  // The mask is the documented pure function of (seed, element): kept iff unit_float >= p.
  const std::vector<double> y = read(drop.forward(x, kiln::Mode::train, seed));
  int kept = 0;
  for (std::int64_t i = 0; i < B * F; ++i) {
    const bool keep = kiln::unit_float(kiln::derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
    kept += keep;
    const double want = keep ? static_cast<double>(static_cast<float>(xv[i]) / (1.0f - p)) : 0.0;
    BOOST_TEST(y[i] == want, boost::test_tools::tolerance(1e-6));
  }
  BOOST_TEST(kept > 0);
  BOOST_TEST(kept < B * F);

  auto loss = [&] { return dot(read(drop.forward(x, kiln::Mode::train, seed)), r); };
  drop.forward(x, kiln::Mode::train, seed);
  const std::vector<double> dx = read(drop.backward(device_f32({B, F}, r)));
  check_gradient("Dropout p=0.3", x, dx, loss);

  // Evaluation is the identity, and backward after it is refused.
  const std::vector<double> ye = read(drop.forward(x, kiln::Mode::eval, seed));
  for (std::size_t i = 0; i < xv.size(); ++i) BOOST_TEST(ye[i] == xv[i]);
  BOOST_CHECK_THROW(drop.backward(device_f32({B, F}, r)), kiln::BackendError);
}

BOOST_AUTO_TEST_CASE(dropout_rejects_bad_probability) {
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([] { kiln::nn::Dropout d(1.0f); }) ==
             "dropout probability 1 is not in [0, 1)");
  BOOST_CHECK_THROW(kiln::nn::Dropout(-0.1f), kiln::ConfigError);
}

// ---- softmax cross-entropy --------------------------------------------------------------------

void check_softmax_xent(float smoothing) {
  constexpr std::int64_t B = 5, K = 4;
  kiln::nn::SoftmaxCrossEntropy xent(smoothing);
  xent.build(cpu(), B, K);
  const std::vector<double> lv = random_values(B * K, 9, -3, 3);
  const Tensor logits = device_f32({B, K}, lv);
  const std::vector<std::int32_t> labels_host = {0, 3, 1, 1, 2};
  Tensor labels_h = kiln::host_tensor({B}, kiln::DType::i32);
  std::copy(labels_host.begin(), labels_host.end(), labels_h.data_as<std::int32_t>());
  Tensor labels = cpu().allocate({B}, kiln::DType::i32, kiln::MemoryKind::device);
  cpu().copy(labels_h, labels);

  // Forward against a double reference: loss_i = -sum_k target_ik log softmax_ik.
  double want_loss = 0, want_correct = 0;
  for (std::int64_t i = 0; i < B; ++i) {
    double mx = -1e300;
    std::int64_t arg = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      if (lv[i * K + k] > mx) mx = lv[i * K + k], arg = k;
    }
    double z = 0;
    for (std::int64_t k = 0; k < K; ++k) z += std::exp(lv[i * K + k] - mx);
    for (std::int64_t k = 0; k < K; ++k) {
      const double target = (k == labels_host[i] ? 1.0 - smoothing : 0.0) + smoothing / K;
      want_loss -= target * (lv[i * K + k] - mx - std::log(z));
    }
    want_correct += arg == labels_host[i];
  }
  xent.reset_totals();
  xent.forward(logits, labels, B);
  const auto [loss_sum, correct] = xent.totals();
  BOOST_TEST(loss_sum == want_loss, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(correct == want_correct);

  auto loss = [&] {
    xent.reset_totals();
    xent.forward(logits, labels, B);
    return xent.totals().first;
  };
  xent.reset_totals();
  xent.forward(logits, labels, B);
  const std::vector<double> dl = read(xent.backward(1.0f));
  check_gradient("SoftmaxCrossEntropy smoothing " + std::to_string(smoothing), logits, dl, loss);

  // Scale multiplies the gradient; rows past valid_rows get zero gradient and no loss.
  xent.reset_totals();
  xent.forward(logits, labels, 3);
  const std::vector<double> dl_part = read(xent.backward(0.5f));
  for (std::int64_t i = 0; i < B * K; ++i) {
    const double want = i < 3 * K ? 0.5 * dl[static_cast<std::size_t>(i)] : 0.0;
    BOOST_TEST(dl_part[i] == want, boost::test_tools::tolerance(1e-5));
  }
}

BOOST_AUTO_TEST_CASE(softmax_xent_without_smoothing) { check_softmax_xent(0.0f); }
BOOST_AUTO_TEST_CASE(softmax_xent_with_label_smoothing) { check_softmax_xent(0.1f); }

// ---- the mlp model plugin -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(mlp_model_gradients_and_ready_order) {
  constexpr std::int64_t B = 5, F = 6, K = 4;
  auto model = kiln::test::make_mlp("in_features = 6\nhidden = [16, 8]\nactivation = \"tanh\"\n"
                                    "dropout = 0.0\nnum_classes = 4\n");
  BOOST_TEST(model->name() == "mlp");
  BOOST_TEST((model->input_spec().sample_shape == kiln::Shape{F}));
  BOOST_TEST(model->input_spec().num_classes == K);
  kiln::ModelBuildContext ctx;
  ctx.backend = &cpu();
  ctx.max_batch = B;
  ctx.seed = 5;
  model->build(ctx);

  const auto params = model->parameters();
  const std::vector<std::string> names = {"layers.0.weight", "layers.0.bias", "layers.1.weight",
                                          "layers.1.bias",   "head.weight",   "head.bias"};
  BOOST_TEST_REQUIRE(params.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) BOOST_TEST(params[i].name == names[i]);
  BOOST_TEST((params[0].value.shape() == kiln::Shape{16, F}));
  BOOST_TEST((params[4].value.shape() == kiln::Shape{K, 8}));

  const Tensor x = device_f32({B, F}, random_values(B * F, 10));
  const std::vector<double> r = random_values(B * K, 11);
  auto loss = [&] { return dot(read(model->forward(x, kiln::Mode::train, 0)), r); };

  for (const auto& p : params) cpu().fill(p.grad, 0.0);
  model->forward(x, kiln::Mode::train, 0);
  std::vector<std::size_t> order;
  std::map<std::size_t, std::vector<double>> grad_when_ready;
  model->backward(device_f32({B, K}, r), [&](std::size_t i) {
    order.push_back(i);
    grad_when_ready[i] = read(params[i].grad);  // must already be complete when reported
  });
  // Reverse layer order, weight before bias within a layer; each parameter exactly once.
  BOOST_TEST((order == std::vector<std::size_t>{4, 5, 2, 3, 0, 1}));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::vector<double> g = read(params[i].grad);
    BOOST_TEST(std::count(order.begin(), order.end(), i) == 1);
    BOOST_TEST((grad_when_ready[i] == g), params[i].name << " changed after it was reported ready");
    check_gradient("mlp " + params[i].name, params[i].value, g, loss);
  }
}

// ---- ParameterStore -----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(parameter_store_alignment_and_disjoint_views) {
  kiln::nn::ParameterStore store;
  const std::vector<kiln::Shape> shapes = {{3, 5}, {7}, {1}, {16}, {2, 17}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    BOOST_TEST(store.declare(fmt::format("p{}", i), shapes[i], kiln::nn::Init::uniform(-1, 1)) == i);
  }
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 3);
  BOOST_TEST(store.allocated());
  std::int64_t prev_end = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const kiln::Parameter& p = store[i];
    BOOST_TEST(store.offset(i) * 4 % 64 == 0, "offset of " << p.name);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(p.value.data()) % 64 == 0);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(p.grad.data()) % 64 == 0);
    BOOST_TEST(p.value.shape() == shapes[i]);
    BOOST_TEST(p.value.offset_bytes() == static_cast<std::size_t>(store.offset(i) * 4));
    BOOST_TEST(p.value.storage() == store.value_arena().storage());
    BOOST_TEST(p.grad.storage() == store.grad_arena().storage());
    BOOST_TEST(p.compute.data() == p.value.data());  // fp32: compute is the master copy
    BOOST_TEST(store.offset(i) >= prev_end, p.name << " overlaps its predecessor");
    prev_end = store.offset(i) + p.value.numel();
  }
  BOOST_TEST(store.arena_elements() >= prev_end);
  BOOST_TEST(store.arena_elements() % 16 == 0);

  // Gaps are zero, gradients start at zero.
  const auto all = read(store.value_arena());
  std::vector<bool> inside(all.size(), false);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    for (std::int64_t k = 0; k < store[i].value.numel(); ++k) inside[store.offset(i) + k] = true;
  }
  for (std::size_t k = 0; k < all.size(); ++k) {
    if (!inside[k]) BOOST_TEST(all[k] == 0.0, "gap element " << k);
  }
  for (double g : read(store.grad_arena())) BOOST_TEST(g == 0.0);

  BOOST_CHECK_THROW(store.declare("late", {2}, kiln::nn::Init::zeros()), kiln::BackendError);
}

std::vector<double> init_values(const std::vector<std::string>& order, const std::string& which,
                                std::uint64_t seed) {
  kiln::nn::ParameterStore store;
  std::map<std::string, std::size_t> index;
  for (const auto& name : order) {
    index[name] = store.declare(name, {4, 6}, kiln::nn::Init::uniform(-0.5f, 0.5f));
  }
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, seed);
  return read(store[index.at(which)].value);
}

BOOST_AUTO_TEST_CASE(parameter_store_init_is_per_seed_and_name) {
  const auto a = init_values({"a", "b"}, "a", 42);
  BOOST_TEST(a == init_values({"a", "b"}, "a", 42));             // deterministic
  BOOST_TEST(a == init_values({"z", "b", "a"}, "a", 42));        // independent of declaration order
  BOOST_TEST(a != init_values({"a", "b"}, "a", 43));             // depends on the seed
  BOOST_TEST(a != init_values({"a", "b"}, "b", 42));             // and on the name
  for (double v : a) {
    BOOST_TEST(v >= -0.5);
    BOOST_TEST(v < 0.5);
  }
}

BOOST_AUTO_TEST_CASE(parameter_store_init_kinds) {
  kiln::nn::ParameterStore store;
  const auto z = store.declare("z", {5}, kiln::nn::Init::zeros());
  const auto o = store.declare("o", {5}, kiln::nn::Init::ones());
  const auto n = store.declare("n", {4096}, kiln::nn::Init::normal(2.0f, 0.5f));
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 9);
  for (double v : read(store[z].value)) BOOST_TEST(v == 0.0);
  for (double v : read(store[o].value)) BOOST_TEST(v == 1.0);
  const auto nv = read(store[n].value);
  double mean = 0, var = 0;
  for (double v : nv) mean += v;
  mean /= static_cast<double>(nv.size());
  for (double v : nv) var += (v - mean) * (v - mean);
  var /= static_cast<double>(nv.size());
  BOOST_TEST(mean == 2.0, boost::test_tools::tolerance(0.02));  // 4096 draws: sem ~ 0.008
  BOOST_TEST(std::sqrt(var) == 0.5, boost::test_tools::tolerance(0.05));
}

BOOST_AUTO_TEST_CASE(parameter_store_duplicate_name_is_config_error) {
  kiln::nn::ParameterStore store;
  store.declare("layers.0.weight", {2, 2}, kiln::nn::Init::zeros());
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] {
               store.declare("layers.0.weight", {3}, kiln::nn::Init::zeros());
             }) == "two parameters are named 'layers.0.weight'; names must be unique");
}

}  // namespace
