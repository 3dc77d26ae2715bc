// The `fp16` plugin on the real cpu backend: check_backend's message on a backend without f16
// matmul, f16 compute copies equal to the rounded masters (one cast per arena), unscaling of
// finite reduced gradients, skip + backoff with an inf or NaN planted (gradients left untouched:
// the trainer zeroes them), growth, the floor, metrics and state keys.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "kiln/errors.hpp"
#include "precision_fixture.hpp"

using kiln::DType;
using kiln::Op;
using kiln::StepDecision;
namespace t = kiln::test;

namespace {

// Masters with values that f16 does not hold exactly.
std::vector<double> masters(std::int64_t n, double offset) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = offset + 0.1 * static_cast<double>(i) + 1.0 / 3.0;
  return v;
}

std::vector<double> times(const std::vector<double>& v, double f) {
  std::vector<double> out(v);
  for (double& x : out) x *= f;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fp16_policy)

BOOST_AUTO_TEST_CASE(describes_itself_with_the_default_schedule) {
  const auto p = t::make_policy("fp16", "");
  BOOST_TEST(p->name() == "fp16");
  BOOST_TEST((p->param_dtype() == DType::f32));
  BOOST_TEST((p->compute_dtype() == DType::f16));
  BOOST_TEST(p->loss_scale() == 65536.0f);
  const auto m = p->metrics();
  BOOST_TEST(m.size() == 2u);
  BOOST_TEST(m.at("loss_scale") == 65536.0);
  BOOST_TEST(m.at("skipped_steps") == 0.0);
  const auto st = p->state();
  BOOST_TEST(st.size() == 5u);
  for (const char* key : {"scale", "good_steps", "skipped_steps", "consecutive_skips", "steps"}) {
    BOOST_TEST(st.count(key) == 1u, key);
  }
}

BOOST_AUTO_TEST_CASE(the_cpu_backend_is_accepted_and_one_without_f16_matmul_is_refused) {
  const auto p = t::make_policy("fp16", "");
  // The cpu backend stores f16 and computes in f32, so the fp16 policy runs on it.
  BOOST_CHECK_NO_THROW(p->check_backend(t::cpu()));
  t::PolicyWatchBackend without_f16(t::cpu());
  without_f16.unsupported = {{Op::matmul, DType::f16}};
  BOOST_TEST(t::error_text<kiln::UnsupportedError>([&] { p->check_backend(without_f16); }) ==
             "backend 'cpu' cannot compute in f16: matmul f16 is not supported; use precision.type = \"bf16\" "
             "or \"fp32\"");
}

BOOST_AUTO_TEST_CASE(before_forward_casts_every_master_to_f16_in_one_op) {
  const auto store = t::make_store(DType::f16);
  const auto params = store->parameters();
  const auto p = t::make_policy("fp16", "");
  t::PolicyWatchBackend backend(t::cpu());
  for (int round = 0; round < 2; ++round) {  // the second round proves copies are refreshed
    for (std::size_t i = 0; i < params.size(); ++i) {
      t::write(params[i].value, masters(params[i].value.numel(), static_cast<double>(i) + round * 7.0));
    }
    p->before_forward(backend, params);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto master = t::read(params[i].value);
      const auto compute = t::read(params[i].compute);
      for (std::size_t k = 0; k < master.size(); ++k) {
        BOOST_TEST(compute[k] == t::round_to_bits(master[k], 11), params[i].name << "[" << k << "]");
      }
    }
  }
  BOOST_TEST(backend.casts == 2);  // one per call: the three parameters share one arena
}

BOOST_AUTO_TEST_CASE(finite_gradients_are_unscaled_and_applied) {
  const auto store = t::make_store(DType::f16);
  const auto params = store->parameters();
  const auto p = t::make_policy("fp16", "");
  t::PolicyWatchBackend backend(t::cpu());
  std::vector<std::vector<double>> truth;
  for (std::size_t i = 0; i < params.size(); ++i) {
    truth.push_back(masters(params[i].grad.numel(), -2.0 * static_cast<double>(i)));
    t::write(params[i].grad, times(truth.back(), 65536.0));  // what backward produced at scale 2^16
  }
  BOOST_TEST((p->after_allreduce(backend, params) == StepDecision::apply));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto g = t::read(params[i].grad);
    for (std::size_t k = 0; k < g.size(); ++k) {
      BOOST_TEST(g[k] == static_cast<double>(static_cast<float>(truth[i][k])), params[i].name << "[" << k << "]");
    }
  }
  BOOST_TEST(backend.finite_checks == 1);
  BOOST_TEST(backend.scales == 1);
  BOOST_TEST(p->loss_scale() == 65536.0f);
  BOOST_TEST(p->metrics().at("skipped_steps") == 0.0);
  BOOST_TEST(p->state().at("good_steps") == 1.0);
}

BOOST_AUTO_TEST_CASE(an_inf_or_nan_skips_the_step_halves_the_scale_and_leaves_the_grads) {
  for (const double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    const auto store = t::make_store(DType::f16);
    const auto params = store->parameters();
    const auto p = t::make_policy("fp16", "");
    std::vector<std::vector<double>> written;
    for (std::size_t i = 0; i < params.size(); ++i) {
      written.push_back(times(masters(params[i].grad.numel(), 1.0), 65536.0));
      if (i == 1) written.back()[3] = bad;
      t::write(params[i].grad, written.back());
    }
    BOOST_TEST((p->after_allreduce(t::cpu(), params) == StepDecision::skip));
    BOOST_TEST(p->loss_scale() == 32768.0f);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto g = t::read(params[i].grad);
      for (std::size_t k = 0; k < g.size(); ++k) {
        if (std::isnan(written[i][k])) {
          BOOST_TEST(std::isnan(g[k]));
        } else {
          BOOST_TEST(g[k] == static_cast<double>(static_cast<float>(written[i][k])));  // still scaled
        }
      }
    }
    const auto m = p->metrics();
    BOOST_TEST(m.at("loss_scale") == 32768.0);
    BOOST_TEST(m.at("skipped_steps") == 1.0);
    BOOST_TEST(p->state().at("consecutive_skips") == 1.0);
  }
}

BOOST_AUTO_TEST_CASE(parameters_drive_growth_floor_and_static_mode) {
  const auto store = t::make_store(DType::f16);
  const auto params = store->parameters();
  for (const auto& param : params) kiln::test::write(param.grad, std::vector<double>(param.grad.numel(), 1.0));

  const auto growing = t::make_policy("fp16", "initial_scale = 8.0\ngrowth_interval = 2");
  growing->after_allreduce(t::cpu(), params);
  BOOST_TEST(growing->loss_scale() == 8.0f);
  growing->after_allreduce(t::cpu(), params);
  BOOST_TEST(growing->loss_scale() == 16.0f);

  t::write(params[2].grad, {1.0, std::numeric_limits<double>::infinity(), 1.0, 1.0});
  const auto floored = t::make_policy("fp16", "initial_scale = 2.0");
  BOOST_TEST((floored->after_allreduce(t::cpu(), params) == StepDecision::skip));
  BOOST_TEST(floored->loss_scale() == 1.0f);
  BOOST_TEST(t::error_text<kiln::NumericError>([&] { floored->after_allreduce(t::cpu(), params); }) ==
             "loss scale fell below the floor 1 after 2 consecutive overflows at step 1; the model diverged or "
             "the data contain inf/NaN");

  const auto fixed = t::make_policy("fp16", "initial_scale = 1024.0\ndynamic = false");
  BOOST_TEST(t::error_text<kiln::NumericError>([&] { fixed->after_allreduce(t::cpu(), params); }) ==
             "gradients are not finite (inf or NaN) at step 0 with the static loss scale 1024; lower "
             "precision.initial_scale or set precision.dynamic = true");
}

BOOST_AUTO_TEST_CASE(state_round_trips_through_the_plugin) {
  const auto store = t::make_store(DType::f16);
  const auto params = store->parameters();
  for (const auto& param : params) t::write(param.grad, std::vector<double>(param.grad.numel(), 1.0));
  t::write(params[0].grad, std::vector<double>(15, std::numeric_limits<double>::infinity()));
  const auto a = t::make_policy("fp16", "");
  a->after_allreduce(t::cpu(), params);
  const auto b = t::make_policy("fp16", "");
  b->load_state(a->state());
  BOOST_TEST(b->loss_scale() == 32768.0f);
  BOOST_TEST((b->state() == a->state()));
  BOOST_TEST((b->metrics() == a->metrics()));
}

BOOST_AUTO_TEST_CASE(a_bad_schedule_is_a_config_error_naming_the_key) {
  const std::string msg =
      t::error_text<kiln::ConfigError>([] { t::make_policy("fp16", "growth_factor = 1.0"); });
  // The schema's range refuses it before the policy (and its LossScaler) is created.
  BOOST_TEST(msg == "test.toml:2:17: [precision] growth_factor = 1 is out of range: it must be > 1", msg);
}

BOOST_AUTO_TEST_SUITE_END()
