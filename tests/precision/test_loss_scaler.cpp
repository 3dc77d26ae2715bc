// The LossScaler state machine: overflow -> skip + backoff, growth after N finite steps, the
// max cap, the floor's NumericError, the fixed mode, option checks and the state round trip.
#include <boost/test/unit_test.hpp>

#include "kiln/errors.hpp"
#include "kiln/sdk/loss_scaler.hpp"
#include "precision_fixture.hpp"

using kiln::StepDecision;
using kiln::sdk::GradStatus;
using kiln::sdk::LossScaler;
using kiln::sdk::LossScalerOptions;
using kiln::sdk::ScaleMode;

namespace {

LossScalerOptions small(double initial, std::int64_t interval) {
  LossScalerOptions o;
  o.initial_scale = initial;
  o.growth_interval = interval;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loss_scaler)

BOOST_AUTO_TEST_CASE(defaults_are_the_issue_numbers) {
  LossScaler s;
  BOOST_TEST(s.scale() == 65536.0);
  BOOST_TEST(s.options().growth_interval == 2000);
  BOOST_TEST(s.options().growth_factor == 2.0);
  BOOST_TEST(s.options().backoff_factor == 0.5);
  BOOST_TEST(s.options().min_scale == 1.0);
  BOOST_TEST(s.options().max_scale == 16777216.0);
  const auto m = s.metrics();
  BOOST_TEST(m.size() == 2u);
  BOOST_TEST(m.at("loss_scale") == 65536.0);
  BOOST_TEST(m.at("skipped_steps") == 0.0);
}

BOOST_AUTO_TEST_CASE(overflow_skips_and_backs_off) {
  LossScaler s(small(1024, 3));
  BOOST_TEST((s.update(GradStatus::finite) == StepDecision::apply));
  BOOST_TEST(s.good_steps() == 1);
  BOOST_TEST((s.update(GradStatus::non_finite) == StepDecision::skip));
  BOOST_TEST(s.scale() == 512.0);
  BOOST_TEST(s.good_steps() == 0);  // the growth count starts again
  BOOST_TEST(s.skipped_steps() == 1);
  BOOST_TEST(s.consecutive_skips() == 1);
  BOOST_TEST((s.update(GradStatus::non_finite) == StepDecision::skip));
  BOOST_TEST(s.scale() == 256.0);
  BOOST_TEST(s.consecutive_skips() == 2);
  BOOST_TEST((s.update(GradStatus::finite) == StepDecision::apply));
  BOOST_TEST(s.consecutive_skips() == 0);
  BOOST_TEST(s.skipped_steps() == 2);
  BOOST_TEST(s.steps() == 4);
  BOOST_TEST(s.metrics().at("skipped_steps") == 2.0);
  BOOST_TEST(s.metrics().at("loss_scale") == 256.0);
}

BOOST_AUTO_TEST_CASE(grows_after_growth_interval_finite_steps) {
  LossScaler s(small(1024, 3));
  s.update(GradStatus::finite);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 1024.0);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 2048.0);
  BOOST_TEST(s.good_steps() == 0);
  // An overflow in the middle restarts the count: 2 good, 1 bad, then 3 more good to grow.
  s.update(GradStatus::finite);
  s.update(GradStatus::finite);
  s.update(GradStatus::non_finite);
  BOOST_TEST(s.scale() == 1024.0);
  s.update(GradStatus::finite);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 1024.0);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 2048.0);
}

BOOST_AUTO_TEST_CASE(growth_is_capped_at_max_scale) {
  LossScalerOptions o = small(4194304.0, 1);  // 2^22, grow every step
  LossScaler s(o);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 8388608.0);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 16777216.0);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 16777216.0);
  o.max_scale = 3000.0;
  o.initial_scale = 2048.0;
  LossScaler capped(o);
  capped.update(GradStatus::finite);
  BOOST_TEST(capped.scale() == 3000.0);  // a non-power-of-two cap is honoured exactly
}

BOOST_AUTO_TEST_CASE(falling_below_the_floor_is_a_numeric_error) {
  LossScaler s(small(4, 100));
  s.update(GradStatus::finite);
  s.update(GradStatus::finite);
  BOOST_TEST((s.update(GradStatus::non_finite) == StepDecision::skip));  // 4 -> 2, step 2
  BOOST_TEST((s.update(GradStatus::non_finite) == StepDecision::skip));  // 2 -> 1, step 3
  BOOST_TEST(s.scale() == 1.0);
  const std::string msg = kiln::test::error_text<kiln::NumericError>([&] { s.update(GradStatus::non_finite); });
  BOOST_TEST(msg ==
             "loss scale fell below the floor 1 after 3 consecutive overflows at step 4; the model diverged or "
             "the data contain inf/NaN");
  BOOST_TEST(s.scale() == 1.0);  // the last usable scale stays in the state
  BOOST_TEST(s.skipped_steps() == 2);
}

BOOST_AUTO_TEST_CASE(a_custom_floor_is_named) {
  LossScalerOptions o = small(1024, 100);
  o.min_scale = 256;
  LossScaler s(o);
  s.update(GradStatus::non_finite);
  s.update(GradStatus::non_finite);
  BOOST_TEST(s.scale() == 256.0);
  const std::string msg = kiln::test::error_text<kiln::NumericError>([&] { s.update(GradStatus::non_finite); });
  BOOST_TEST(msg.find("loss scale fell below the floor 256 after 3 consecutive overflows at step 2;") == 0u, msg);
}

BOOST_AUTO_TEST_CASE(fixed_mode_never_changes_and_stops_at_the_first_overflow) {
  LossScalerOptions o = small(128, 1);
  o.mode = ScaleMode::fixed;
  LossScaler s(o);
  s.update(GradStatus::finite);
  s.update(GradStatus::finite);
  BOOST_TEST(s.scale() == 128.0);
  const std::string msg = kiln::test::error_text<kiln::NumericError>([&] { s.update(GradStatus::non_finite); });
  BOOST_TEST(msg ==
             "gradients are not finite (inf or NaN) at step 2 with the static loss scale 128; lower "
             "precision.initial_scale or set precision.dynamic = true");
}

BOOST_AUTO_TEST_CASE(inconsistent_options_are_config_errors) {
  LossScalerOptions o;
  o.growth_factor = 1.0;
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] { LossScaler{o}; }) ==
             "loss scaler option growth_factor = 1 must be > 1; fix the [precision] table");
  o = LossScalerOptions{};
  o.backoff_factor = 1.5;
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] { LossScaler{o}; }) ==
             "loss scaler option backoff_factor = 1.5 must lie in (0, 1); fix the [precision] table");
  o = LossScalerOptions{};
  o.initial_scale = 0.5;
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] { LossScaler{o}; }) ==
             "loss scaler option initial_scale = 0.5 must lie in [min_scale, max_scale] = [1, 16777216]; fix "
             "the [precision] table");
  o = LossScalerOptions{};
  o.growth_interval = 0;
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] { LossScaler{o}; }) ==
             "loss scaler option growth_interval = 0 must be >= 1; fix the [precision] table");
}

BOOST_AUTO_TEST_CASE(options_from_a_param_map_name_key_and_origin) {
  kiln::ParamMap p("precision");
  p.set("initial_scale", 256.0, "default");
  p.set("growth_interval", std::int64_t{10}, "test.toml:3");
  p.set("growth_factor", 4.0, "test.toml:4");
  p.set("backoff_factor", 0.25, "default");
  p.set("min_scale", 2.0, "default");
  p.set("max_scale", 1024.0, "default");
  p.set("dynamic", false, "test.toml:5");
  const LossScalerOptions o = kiln::sdk::loss_scaler_options(p);
  BOOST_TEST(o.initial_scale == 256.0);
  BOOST_TEST(o.growth_interval == 10);
  BOOST_TEST(o.growth_factor == 4.0);
  BOOST_TEST(o.backoff_factor == 0.25);
  BOOST_TEST(o.min_scale == 2.0);
  BOOST_TEST(o.max_scale == 1024.0);
  BOOST_TEST((o.mode == ScaleMode::fixed));
  p.set("growth_factor", 0.5, "test.toml:4");
  BOOST_TEST(kiln::test::error_text<kiln::ConfigError>([&] { kiln::sdk::loss_scaler_options(p); }) ==
             "precision.growth_factor (test.toml:4) = 0.5 must be > 1; fix the [precision] table");
}

BOOST_AUTO_TEST_CASE(state_round_trips_and_continues_identically) {
  LossScaler a(small(1024, 3));
  a.update(GradStatus::finite);
  a.update(GradStatus::non_finite);
  a.update(GradStatus::finite);
  a.update(GradStatus::finite);
  const auto st = a.state();
  BOOST_TEST(st.size() == 5u);
  BOOST_TEST(st.at("scale") == 512.0);
  BOOST_TEST(st.at("good_steps") == 2.0);
  BOOST_TEST(st.at("skipped_steps") == 1.0);
  BOOST_TEST(st.at("consecutive_skips") == 0.0);
  BOOST_TEST(st.at("steps") == 4.0);

  LossScaler b(small(1024, 3));
  b.load_state(st);
  BOOST_TEST((b.state() == st));
  // One more good step completes the interval in both.
  a.update(GradStatus::finite);
  b.update(GradStatus::finite);
  BOOST_TEST(b.scale() == 1024.0);
  BOOST_TEST((a.state() == b.state()));
}

BOOST_AUTO_TEST_CASE(an_empty_state_starts_afresh) {
  LossScaler s(small(1024, 3));
  s.update(GradStatus::non_finite);
  s.load_state({});
  BOOST_TEST(s.scale() == 512.0);  // unchanged: nothing was saved (fp32/bf16 checkpoint)
  BOOST_TEST(s.steps() == 1);
}

BOOST_AUTO_TEST_CASE(fixed_mode_keeps_the_configured_scale_on_load) {
  LossScalerOptions o = small(64, 3);
  o.mode = ScaleMode::fixed;
  LossScaler s(o);
  s.load_state({{"scale", 512.0}, {"good_steps", 0}, {"skipped_steps", 0}, {"consecutive_skips", 0}, {"steps", 9}});
  BOOST_TEST(s.scale() == 64.0);
  BOOST_TEST(s.steps() == 9);
}

BOOST_AUTO_TEST_CASE(bad_state_is_a_data_error) {
  LossScaler s;
  auto st = s.state();
  st.erase("good_steps");
  BOOST_TEST(kiln::test::error_text<kiln::DataError>([&] { s.load_state(st); }) ==
             "loss scaler state lacks 'good_steps'; the checkpoint was written by another precision policy or "
             "is damaged");
  st = s.state();
  st["scale"] = 0.25;
  BOOST_TEST(kiln::test::error_text<kiln::DataError>([&] { s.load_state(st); }) ==
             "loss scaler state 'scale' = 0.25 lies outside [min_scale, max_scale] = [1, 16777216]; the "
             "checkpoint is damaged or the configured bounds changed");
  st = s.state();
  st["skipped_steps"] = 1.5;
  BOOST_TEST(kiln::test::error_text<kiln::DataError>([&] { s.load_state(st); }).find(
                 "loss scaler state 'skipped_steps' = 1.5 is not a non-negative integer") == 0u);
  st = s.state();
  st["lr"] = 0.1;
  BOOST_TEST(kiln::test::error_text<kiln::DataError>([&] { s.load_state(st); }).find(
                 "loss scaler state has an unknown key 'lr'") == 0u);
  BOOST_TEST(s.scale() == 65536.0);  // a refused state changes nothing
}

BOOST_AUTO_TEST_SUITE_END()
