// The `fp16` plugin's loss-scale schedule as the trainer drives it, one step at a time: which scale
// unscales a step's gradients when that step grows the scale or follows a backoff (the scale the
// backward ran with, not the updated one), a whole overflow -> skip + backoff, growth after N
// finite steps, floor -> NumericError trace through the plugin's own [precision] keys, and
// check_backend's refusal of a backend without the f16 cast (test_fp16_policy.cpp has the matmul
// one). Complements test_loss_scaler.cpp (the bare state machine).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "kiln/errors.hpp"
#include "precision_fixture.hpp"

using kiln::DType;
using kiln::Op;
using kiln::StepDecision;
namespace t = kiln::test;

namespace {

// True gradients with values no power-of-two scaling rounds (exact in f32 at any scale used here).
std::vector<double> truth(std::int64_t n, double offset) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(offset - 0.37 * static_cast<double>(i) + 0.01);
  return v;
}

/// Writes what backward produced at loss scale `scale` (truth x scale), or an inf in "b"[2].
void write_step(std::span<const kiln::Parameter> params, double scale, bool overflow) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<double> g = truth(params[i].grad.numel(), static_cast<double>(i));
    for (double& x : g) x *= scale;
    if (overflow && i == 1) g[2] = std::numeric_limits<double>::infinity();
    t::write(params[i].grad, g);
  }
}

/// Requires every gradient to equal the truth exactly (the unscale used the step's own scale).
void require_unscaled(std::span<const kiln::Parameter> params, const char* when) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto want = truth(params[i].grad.numel(), static_cast<double>(i));
    const auto got = t::read(params[i].grad);
    for (std::size_t k = 0; k < got.size(); ++k) {
      BOOST_TEST(got[k] == want[k], when << ": " << params[i].name << "[" << k << "]");
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fp16_schedule)

BOOST_AUTO_TEST_CASE(the_step_that_grows_the_scale_is_unscaled_by_the_scale_it_ran_with) {
  const auto store = t::make_store(DType::f16);
  const auto params = store->parameters();
  const auto p = t::make_policy("fp16", "initial_scale = 8.0\ngrowth_interval = 1");
  write_step(params, 8.0, false);
  BOOST_TEST((p->after_allreduce(t::cpu(), params) == StepDecision::apply));
  require_unscaled(params, "growth step");  // divided by 8, not by the new 16
  BOOST_TEST(p->loss_scale() == 16.0f);
  write_step(params, 16.0, false);
  BOOST_TEST((p->after_allreduce(t::cpu(), params) == StepDecision::apply));
  require_unscaled(params, "step after growth");
  BOOST_TEST(p->loss_scale() == 32.0f);
}

BOOST_AUTO_TEST_CASE(the_step_after_a_backoff_is_unscaled_by_the_halved_scale) {
  const auto store = t::make_store(DType::f16);
  const auto params = store->parameters();
  const auto p = t::make_policy("fp16", "");
  write_step(params, 65536.0, true);
  BOOST_TEST((p->after_allreduce(t::cpu(), params) == StepDecision::skip));
  BOOST_TEST(p->loss_scale() == 32768.0f);
  write_step(params, 32768.0, false);  // the trainer's next backward runs at the halved scale
  BOOST_TEST((p->after_allreduce(t::cpu(), params) == StepDecision::apply));
  require_unscaled(params, "step after backoff");
  BOOST_TEST(p->loss_scale() == 32768.0f);
  const auto st = p->state();
  BOOST_TEST(st.at("good_steps") == 1.0);
  BOOST_TEST(st.at("consecutive_skips") == 0.0);
  BOOST_TEST(st.at("skipped_steps") == 1.0);
  BOOST_TEST(st.at("steps") == 2.0);
}

BOOST_AUTO_TEST_CASE(overflow_backoff_growth_and_floor_in_one_trace) {
  const auto store = t::make_store(DType::f16);
  const auto params = store->parameters();
  const auto p = t::make_policy("fp16", "initial_scale = 4.0\ngrowth_interval = 2\nmin_scale = 1.0");
  struct Step {
    bool overflow;
    StepDecision decision;
    float scale_after;
    double skipped_after;
  };
  const Step trace[] = {
      {false, StepDecision::apply, 4.0f, 0},  // 1 finite step: not yet
      {false, StepDecision::apply, 8.0f, 0},  // 2 finite steps: grow
      {true, StepDecision::skip, 4.0f, 1},    // overflow: skip, halve
      {false, StepDecision::apply, 4.0f, 1},  // the growth count restarted at the overflow
      {false, StepDecision::apply, 8.0f, 1},  // ...and grows after 2 more finite steps
      {true, StepDecision::skip, 4.0f, 2},
      {true, StepDecision::skip, 2.0f, 3},
      {true, StepDecision::skip, 1.0f, 4},  // at the floor, still usable
  };
  for (std::size_t i = 0; i < std::size(trace); ++i) {
    const double scale = p->loss_scale();
    write_step(params, scale, trace[i].overflow);
    BOOST_TEST((p->after_allreduce(t::cpu(), params) == trace[i].decision), "step " << i);
    if (!trace[i].overflow) require_unscaled(params, "finite step");
    BOOST_TEST(p->loss_scale() == trace[i].scale_after, "step " << i);
    BOOST_TEST(p->metrics().at("loss_scale") == static_cast<double>(trace[i].scale_after), "step " << i);
    BOOST_TEST(p->metrics().at("skipped_steps") == trace[i].skipped_after, "step " << i);
  }
  write_step(params, 1.0, true);
  BOOST_TEST(t::error_text<kiln::NumericError>([&] { p->after_allreduce(t::cpu(), params); }) ==
             "loss scale fell below the floor 1 after 4 consecutive overflows at step 8; the model diverged or "
             "the data contain inf/NaN");
}

BOOST_AUTO_TEST_CASE(a_backend_without_the_f16_cast_is_refused_with_the_alternatives) {
  const auto p = t::make_policy("fp16", "");
  t::PolicyWatchBackend no_cast(t::cpu());
  no_cast.unsupported = {{Op::cast, DType::f16}};
  BOOST_TEST(t::error_text<kiln::UnsupportedError>([&] { p->check_backend(no_cast); }) ==
             "backend 'cpu' cannot run the fp16 policy: cast f16 is not supported (needed for the f16 weight "
             "copies and loss scaling); use precision.type = \"bf16\" or \"fp32\"");
}

BOOST_AUTO_TEST_SUITE_END()
