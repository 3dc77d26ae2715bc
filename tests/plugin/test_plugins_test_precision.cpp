// `kiln plugins test FILE` on precision policies: Kiln's fp32, bf16 and fp16 (the build tree's,
// lib/kiln/plugins) pass every check on the cpu backend; fp32 and bf16 with check_finite = true
// stop on a non-finite gradient, and at their defaults apply it, which the contract allows a
// policy without loss scaling (the trainer's divergence stop covers it).
// The fixture policy of fixtures/conformance_precision.cpp passes, refused by the backend skips
// the rest, and each of its planted bugs fails exactly the check meant to find it, with status 1.
#define KILN_TEST_MODULE plugins_test_precision
#include "kiln_test_main.hpp"

#include <cstdlib>
#include <sstream>
#include <tuple>

#include "cli/plugins_command.hpp"
#include "test_helpers.hpp"

using kiln_test::contains;
using kiln_test::fixture_library;

namespace {

const char* const kChecks[] = {"dtypes", "backend", "cast", "unscale", "overflow", "scale", "state"};

std::filesystem::path shipped(const std::string& name) {
  return std::filesystem::path(KILN_BINARY_DIR) / "lib/kiln/plugins" / ("libkiln-precision-" + name + ".so");
}

/// `kiln plugins test` on `library` with `--set`s: status and report.
std::pair<int, std::string> plugin_test(const std::filesystem::path& library, const std::vector<std::string>& sets = {}) {
  unsetenv("KILN_PLUGIN_PATH");
  std::vector<std::string> args = {"test", library.string()};
  for (const std::string& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  std::ostringstream out;
  const int status = kiln::cli::run_plugins_command(args, {}, out);
  return {status, out.str()};
}

/// The names of the checks whose lines start with `mark` ("  FAIL  ", "  ok    ", "  -     "), in order.
std::vector<std::string> checks_marked(const std::string& report, const std::string& mark) {
  std::vector<std::string> found;
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(mark)) found.push_back(line.substr(8, line.find(' ', 8) - 8));
  }
  return found;
}

/// The line of check `name` (without its mark), or "" when the report has none.
std::string line_of(const std::string& report, const std::string& name) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 8 && line.substr(8).starts_with(name + " ")) return line;
  }
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(kilns_policies_pass_every_check) {
  // fp32 and bf16 check finiteness only when asked (see the test after this one);
  // allow_emulated makes the bf16 result the same on a CPU without native bf16.
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::string>> policies = {
      {"fp32", {"precision.check_finite=true"}, "masters f32, compute f32"},
      {"bf16", {"precision.check_finite=true", "precision.allow_emulated=true"}, "masters f32, compute bf16"},
      {"fp16", {}, "masters f32, compute f16"}};
  for (const auto& [name, sets, dtypes] : policies) {
    const auto [status, report] = plugin_test(shipped(name), sets);
    BOOST_TEST(status == 0, name << ":\n" << report);
    BOOST_TEST(checks_marked(report, "  FAIL  ").empty(), report);
    BOOST_TEST(contains(report, "\nprecision '" + name + "' 0.1.0\n"), report);
    BOOST_TEST(contains(report, "\nall checks passed\n"), report);
    BOOST_TEST(contains(line_of(report, "dtypes"), dtypes), report);
    BOOST_TEST(contains(line_of(report, "backend"), "accepts the cpu backend on "), report);
    for (const char* check : kChecks) {
      const bool scales = name == "fp16";
      const std::string mark = std::string_view(check) == "scale" && !scales ? "  -     " : "  ok    ";
      BOOST_TEST(line_of(report, check).starts_with(mark), name << " " << check << ":\n" << report);
    }
  }
  const std::string fp32 = plugin_test(shipped("fp32"), {"precision.check_finite=true"}).second;
  BOOST_TEST(contains(line_of(fp32, "cast"), "f32 compute: the copies are the masters themselves"), fp32);
  BOOST_TEST(contains(line_of(fp32, "overflow"), "+inf in 'layer.bias'[1]: NumericError; NaN in 'norm.weight'[1]: "
                                                 "NumericError; -inf in 'layer.weight'[0]: NumericError (the first: "
                                                 "gradient of 'layer.bias' is not finite (inf or NaN) after the all-reduce"),
             fp32);
  BOOST_TEST(contains(line_of(fp32, "scale"), "not run: loss_scale() is 1, the policy does not scale the loss"), fp32);
  BOOST_TEST(contains(line_of(fp32, "state"), "state() is empty after 3 steps (nothing to restore); metrics() {} finite"),
             fp32);
  const std::string bf16 = plugin_test(shipped("bf16"), {"precision.check_finite=true", "precision.allow_emulated=true"}).second;
  BOOST_TEST(contains(line_of(bf16, "cast"), "53 values of 4 parameters (one arena and one storage of its own) rounded "
                                             "to bf16, nearest with ties to even (ties and bf16 subnormals)"),
             bf16);
  // fp16: the LossScaler's schedule at its defaults (2^16, x0.5 on overflow, x2 after 2000 finite steps).
  const std::string fp16 = plugin_test(shipped("fp16")).second;
  BOOST_TEST(contains(line_of(fp16, "cast"), "rounded to f16, nearest with ties to even (ties, f16 subnormals and values "
                                             "past f16's range)"),
             fp16);
  BOOST_TEST(contains(line_of(fp16, "unscale"), "3 steps at loss_scale() 65536, 65536, 65536: applied"), fp16);
  BOOST_TEST(contains(line_of(fp16, "overflow"), "+inf in 'layer.bias'[1]: skipped; NaN in 'norm.weight'[1]: skipped; "
                                                 "-inf in 'layer.weight'[0]: skipped"),
             fp16);
  BOOST_TEST(contains(line_of(fp16, "scale"), "an overflow lowered loss_scale() from 65536 to 32768; 2000 clean steps "
                                              "then raised it to 65536"),
             fp16);
  BOOST_TEST(contains(line_of(fp16, "state"), "state() {consecutive_skips 0, good_steps 1, scale 32768, skipped_steps 1, "
                                              "steps 4} after 4 steps, restored by load_state() into a fresh policy: same "
                                              "state() and loss_scale() 32768"),
             fp16);
}

// At their defaults (check_finite = false) fp32 and bf16 return apply for a step whose gradients
// hold inf or NaN. kiln/precision_policy.hpp allows that of a policy whose loss_scale() is 1: the
// trainer stops at its next loss check and never checkpoints non-finite weights
// (tests/integration/test_hostile_config.cpp). `overflow` passes and says so.
BOOST_AUTO_TEST_CASE(fp32_and_bf16_at_their_defaults_apply_such_a_step_as_the_contract_allows) {
  for (const auto& [name, sets] : {std::pair<std::string, std::vector<std::string>>{"fp32", {}},
                                   {"bf16", {"precision.allow_emulated=true"}}}) {
    const auto [status, report] = plugin_test(shipped(name), sets);
    BOOST_TEST(status == 0, name << ":\n" << report);
    BOOST_TEST(checks_marked(report, "  FAIL  ").empty(), report);
    BOOST_TEST(contains(line_of(report, "overflow"),
                        "+inf in 'layer.bias'[1]: applied; NaN in 'norm.weight'[1]: applied; -inf in 'layer.weight'[0]: "
                        "applied: allowed without loss scaling (loss_scale() is 1), the trainer stops at its next loss "
                        "check and never checkpoints non-finite weights"),
               report);
  }
}

// A policy that refuses the backend (with UnsupportedError and a message) passes `backend`, and
// the checks after it say they did not run: a refusal is not a failure. Kiln's bf16 does so at its
// defaults on a CPU without native bf16 (avx512_bf16, AMX).
BOOST_AUTO_TEST_CASE(a_refused_backend_skips_the_rest) {
  const auto [status, report] = plugin_test(fixture_library("precision-ok"), {"precision.refuse_backend=true"});
  BOOST_TEST(status == 0, report);
  BOOST_TEST(contains(line_of(report, "backend"), "refuses the cpu backend on "), report);
  BOOST_TEST(contains(line_of(report, "backend"), "with an UnsupportedError: backend 'cpu' cannot run scaled-bf16: "
                                                  "precision.refuse_backend = true"),
             report);
  BOOST_TEST(checks_marked(report, "  ok    ") == (std::vector<std::string>{"dtypes", "backend"}), report);
  BOOST_TEST(checks_marked(report, "  -     ") ==
                 (std::vector<std::string>{"cast", "unscale", "overflow", "scale", "state"}),
             report);
  BOOST_TEST(contains(line_of(report, "state"), "not run: the policy refuses the cpu backend"), report);

  const std::string bf16 = plugin_test(shipped("bf16"), {"precision.check_finite=true"}).second;
  if (contains(line_of(bf16, "backend"), "refuses the cpu backend")) {
    BOOST_TEST(contains(line_of(bf16, "backend"), "which has no native bf16 arithmetic"), bf16);
    BOOST_TEST(contains(line_of(bf16, "cast"), "not run: the policy refuses the cpu backend"), bf16);
  } else {
    BOOST_TEST_MESSAGE("this CPU has native bf16: Kiln's bf16 accepts the cpu backend at its defaults");
    BOOST_TEST(contains(bf16, "\nall checks passed\n"), bf16);
  }
}

BOOST_AUTO_TEST_CASE(the_correct_fixture_passes_every_check) {
  const auto [status, report] = plugin_test(fixture_library("precision-ok"));
  BOOST_TEST(status == 0, report);
  BOOST_TEST(checks_marked(report, "  ok    ") == std::vector<std::string>(std::begin(kChecks), std::end(kChecks)),
             report);
  BOOST_TEST(contains(line_of(report, "scale"), "an overflow lowered loss_scale() from 1024 to 512; 4 clean steps then "
                                                "raised it to 1024"),
             report);
  BOOST_TEST(contains(line_of(report, "state"), "state() {good_steps 1, scale 512, skipped_steps 1} after 4 steps"),
             report);
}

BOOST_AUTO_TEST_CASE(each_planted_bug_fails_its_check) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"precision-truncates", "cast",
       "'layer.weight'[1]: master 1.01171875 has the bf16 copy 1.0078125 (0x3f81), not 1.015625 (0x3f82): the cast "
       "truncates (rounds toward zero); the copy must be the master rounded to nearest, ties to even"},
      {"precision-no-unscale", "unscale",
       "step 1: 'layer.weight'[0] is -889.773682 after after_allreduce, not -0.868919611 (it was given -889.773682, "
       "the true gradient times loss_scale() 1024): the gradients were not unscaled"},
      {"precision-applies-nan", "overflow",
       "after_allreduce returned apply with NaN in 'norm.weight'[1] (the other 3 parameters finite)"},
      {"precision-scale-stuck", "scale",
       "after a step skipped for +inf in 'layer.weight'[3], loss_scale() is 1024 (it was 1024): a dynamic scale must go "
       "down on an overflow"},
      {"precision-forgets-scale", "state",
       "a fresh policy given load_state({good_steps 1, scale 512, skipped_steps 1}) then reports a state() that "
       "['scale'] is 1024, not 512: load_state must restore what state() saved"},
      {"precision-skips-own-storage", "cast",
       "'norm.weight'[0]: master -100000 has the bf16 copy nan (0x7fc0), not -99840 (0xc7c3): before_forward did not "
       "write it (it still holds the NaN it was filled with)"},
      {"precision-casts-once", "cast",
       "after the masters changed, 'layer.weight'[0]: master -1.00000022e-39 has the bf16 copy 1 (0x3f80), not "
       "-1.01019046e-39 (0x800b): it still holds the copy of the previous master 1.00390625; before_forward must "
       "refresh the copies every time"}};
  for (const auto& [fixture, check, detail] : cases) {
    const auto [status, report] = plugin_test(fixture_library(fixture));
    BOOST_TEST(status == 1, fixture << ":\n" << report);
    BOOST_TEST(checks_marked(report, "  FAIL  ") == std::vector<std::string>{check}, fixture << ":\n" << report);
    BOOST_TEST(contains(line_of(report, check), detail), fixture << ":\n" << report);
    BOOST_TEST(contains(report, "\nsome checks FAILED\n"), report);
  }
}
