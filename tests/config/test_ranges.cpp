// Schema ranges (kiln_param_spec_v1 min, max, flags; ABI 2.2): out-of-range numbers and list
// elements, non-finite floats, exclusive and inclusive bounds, --set values, defaults that break
// their own range, malformed bounds, and the text `kiln plugins show` prints.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "fixtures.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"

using kiln::ConfigError;
using kiln::config::Config;
using kiln::config::test::message_of;

namespace {

constexpr kiln_param_spec_v1 kOptimizer[] = {
    {"lr", KILN_PARAM_FLOAT, "0.001", nullptr, "Rate.", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"weight_decay", KILN_PARAM_FLOAT, "0.0", nullptr, "Decay.", "0", nullptr},
    {"beta1", KILN_PARAM_FLOAT, "0.9", nullptr, "Beta.", "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"milestones", KILN_PARAM_INT_LIST, "[]", nullptr, "Epochs.", "0", nullptr},
    {"batch", KILN_PARAM_INT, "64", nullptr, "Batch.", "1", "1024"},
    {"scale", KILN_PARAM_FLOAT, "1.0", nullptr, "May be inf.", nullptr, nullptr, KILN_PARAM_ALLOW_NONFINITE},
};

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  Config cfg = Config::parse(text, "run.toml", overrides);
  return message_of<ConfigError>([&] { cfg.validate("optimizer", kOptimizer); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ranges)

BOOST_AUTO_TEST_CASE(non_finite_floats_are_refused_with_file_and_line) {
  BOOST_TEST(error_of("[optimizer]\nlr = inf\n") ==
                 "run.toml:2:6: [optimizer] lr = inf is out of range: it must be a finite number",
             error_of("[optimizer]\nlr = inf\n"));
  BOOST_TEST(error_of("[optimizer]\nweight_decay = nan\n") ==
                 "run.toml:2:16: [optimizer] weight_decay = nan is out of range: it must be a finite number",
             error_of("[optimizer]\nweight_decay = nan\n"));
}

BOOST_AUTO_TEST_CASE(bounds_are_exclusive_or_inclusive_as_declared) {
  BOOST_TEST(error_of("[optimizer]\nlr = 0.0\n") == "run.toml:2:6: [optimizer] lr = 0 is out of range: it must be > 0");
  BOOST_TEST(error_of("[optimizer]\nlr = -1e-3\n") ==
             "run.toml:2:6: [optimizer] lr = -0.001 is out of range: it must be > 0");
  BOOST_TEST(error_of("[optimizer]\nbeta1 = 1.0\n") ==
             "run.toml:2:9: [optimizer] beta1 = 1 is out of range: it must be in [0, 1)");
  BOOST_TEST(error_of("[optimizer]\nbatch = 1025\n") ==
             "run.toml:2:9: [optimizer] batch = 1025 is out of range: it must be in [1, 1024]");
  BOOST_TEST(error_of("[optimizer]\nbatch = 0\n") ==
             "run.toml:2:9: [optimizer] batch = 0 is out of range: it must be in [1, 1024]");
  // The bounds themselves are allowed where inclusive.
  Config cfg = Config::parse("[optimizer]\nweight_decay = 0.0\nbeta1 = 0.0\nbatch = 1024\n", "run.toml", {});
  const kiln::ParamMap p = cfg.validate("optimizer", kOptimizer);
  BOOST_TEST(p.get_int("batch") == 1024);
  BOOST_TEST(p.get_float("weight_decay") == 0.0);
}

BOOST_AUTO_TEST_CASE(a_list_element_out_of_range_is_named_by_index_and_position) {
  BOOST_TEST(error_of("[optimizer]\nmilestones = [3, -1]\n") ==
             "run.toml:2:18: [optimizer] milestones[1] = -1 is out of range: it must be >= 0");
}

BOOST_AUTO_TEST_CASE(a_set_override_is_named_as_such) {
  const std::string msg = error_of("", {"optimizer.lr=inf"});
  BOOST_TEST(msg.find("--set optimizer.lr") != std::string::npos, msg);
  BOOST_TEST(msg.find("lr = inf is out of range: it must be a finite number") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(a_flag_allows_non_finite_values) {
  Config cfg = Config::parse("[optimizer]\nscale = inf\n", "run.toml", {});
  BOOST_TEST(std::isinf(cfg.validate("optimizer", kOptimizer).get_float("scale")));
}

BOOST_AUTO_TEST_CASE(schema_bounds_and_defaults_are_checked_too) {
  static constexpr kiln_param_spec_v1 bad_bound[] = {{"lr", KILN_PARAM_FLOAT, "0.1", nullptr, "Rate.", "zero"}};
  Config cfg = Config::parse("", "run.toml", {});
  std::string msg = message_of<ConfigError>([&] { cfg.validate("optimizer", bad_bound); });
  BOOST_TEST(msg == "the schema of [optimizer]: 'lr' has min 'zero', which is not a number; fix the schema", msg);
  static constexpr kiln_param_spec_v1 on_string[] = {{"act", KILN_PARAM_STRING, "\"relu\"", nullptr, "A.", "0"}};
  msg = message_of<ConfigError>([&] { cfg.validate("model", on_string); });
  BOOST_TEST(msg == "the schema of [model]: 'act' has a min or max but is not a number or number list; fix the schema",
             msg);
  static constexpr kiln_param_spec_v1 bad_default[] = {{"lr", KILN_PARAM_FLOAT, "0.0", nullptr, "Rate.", "0",
                                                        nullptr, KILN_PARAM_MIN_EXCLUSIVE}};
  msg = message_of<ConfigError>([&] { cfg.validate("optimizer", bad_default); });
  BOOST_TEST(msg == "bad default in the schema of [optimizer] for key 'lr': 0 must be > 0", msg);
}

BOOST_AUTO_TEST_CASE(range_text_is_what_plugins_show_prints) {
  using kiln::config::param_range_text;
  BOOST_TEST(param_range_text(kOptimizer[0]) == "> 0, finite");
  BOOST_TEST(param_range_text(kOptimizer[2]) == "in [0, 1), finite");
  BOOST_TEST(param_range_text(kOptimizer[3]) == ">= 0");
  BOOST_TEST(param_range_text(kOptimizer[4]) == "in [1, 1024]");
  BOOST_TEST(param_range_text(kOptimizer[5]) == "");
}

BOOST_AUTO_TEST_SUITE_END()
