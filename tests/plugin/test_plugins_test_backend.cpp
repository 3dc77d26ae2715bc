// `kiln plugins test` on backend plugins: Kiln's cpu backend passes every check and every case
// group of the op suite; a backend that implements only matmul fails `ops` alone, naming what it
// lacks, with the other groups skipped; each planted bug fails the one more check meant for it.
#define KILN_TEST_MODULE plugins_test_backend
#include "kiln_test_main.hpp"

#include <cstdlib>
#include <sstream>
#include <tuple>

#include "cli/backend_suite/suite.hpp"
#include "cli/plugins_command.hpp"
#include "kiln/errors.hpp"
#include "test_helpers.hpp"

using kiln_test::contains;
using kiln_test::failed_checks;
using kiln_test::fixture_library;

namespace {

std::pair<int, std::string> plugin_test(const std::filesystem::path& library, std::vector<std::string> sets = {}) {
  unsetenv("KILN_PLUGIN_PATH");
  std::vector<std::string> args{"test", library.string()};
  for (auto& set : sets) args.insert(args.end(), {"--set", std::move(set)});
  std::ostringstream out;
  const int status = kiln::cli::run_plugins_command(args, {}, out);
  return {status, out.str()};
}

const std::filesystem::path kCpuBackend = std::filesystem::path(KILN_BINARY_DIR) / "lib/kiln/plugins/libkiln-backend-cpu.so";

}  // namespace

BOOST_AUTO_TEST_CASE(kilns_cpu_backend_passes_every_check_and_case_group) {
  const auto [status, report] = plugin_test(kCpuBackend);
  BOOST_TEST(status == 0, report);
  BOOST_TEST(failed_checks(report).empty(), report);
  for (const char* check : {"make", "device", "ops", "memory", "events", "threads"}) {
    BOOST_TEST(contains(report, std::string("  ok    ") + check + " "), check << " missing from:\n" << report);
  }
  // One line per case group, none skipped: the cpu backend supports every op of every group.
  for (const kiln::conformance::CaseSpec& spec : kiln::conformance::all_cases()) {
    BOOST_TEST(contains(report, "  ok    " + spec.suite + " "), spec.suite << " missing from:\n" << report);
  }
  BOOST_TEST(contains(report, "  ok    matmul                       f32, bf16, f16: 36 outputs match the float64 "
                              "reference (largest relative error "),
             report);
  BOOST_TEST(contains(report, "  ok    cast                         f32, bf16, f16: 6 outputs match the float64 "
                              "reference exactly\n"),
             report);
  // Calls that must be refused are counted apart from the outputs compared with the reference.
  BOOST_TEST(contains(report, "  ok    lerp                         f32: 8 outputs match the float64 reference "
                              "exactly, and 5 bad calls are refused by name\n"),
             report);
  BOOST_TEST(contains(report, "; host memory; activations "), report);
  BOOST_TEST(contains(report, "\nall checks passed\n"), report);
}

// The backend's own table takes --set like a run's [backend]; other tables are refused.
BOOST_AUTO_TEST_CASE(a_set_reaches_the_backend_and_other_tables_are_refused) {
  const auto [status, report] = plugin_test(kCpuBackend, {"backend.threads=1"});
  BOOST_TEST(status == 0, report);
  BOOST_TEST(contains(report, "  ok    make                         made from its parameters' defaults and --set\n"),
             report);
  BOOST_TEST(contains(report, " 1 OpenMP thread"), report);
  try {
    plugin_test(kCpuBackend, {"model.hidden=[4]"});
    BOOST_FAIL("a --set for [model] was accepted for a backend library");
  } catch (const kiln::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "--set model.hidden: unknown table [model]"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_backend_with_only_matmul_fails_ops_and_skips_the_groups_it_lacks) {
  const auto [status, report] = plugin_test(fixture_library("backend-matmul-only"));
  BOOST_TEST(status == 1, report);
  BOOST_TEST(failed_checks(report) == std::vector<std::string>{"ops"}, report);
  BOOST_TEST(contains(report, "supports(op, f32) is false for bias_grad, activation_forward, "), report);
  BOOST_TEST(contains(report, "every op is required in f32"), report);
  BOOST_TEST(contains(report, "  ok    matmul                       f32: 12 outputs match the float64 "
                              "reference (largest relative error "),
             report);
  BOOST_TEST(contains(report, "; not supported, not run: bf16, f16\n"), report);
  BOOST_TEST(contains(report, "  -     bias_grad                    matmul-only backend does not support bias_grad "
                              "in f32 (supports() is false)\n"),
             report);
  BOOST_TEST(contains(report, "\nsome checks FAILED\n"), report);
}

BOOST_AUTO_TEST_CASE(each_planted_backend_bug_fails_its_check) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"backend-transpose-ignored", "matmul", "6 of 12 outputs wrong; f32: c op NT alpha 1.000000 + bias: relative error "},
      {"backend-copy-short", "memory",
       "f32 x 1000003: copy host -> device -> device -> host changed element 1000002 (bytes differ)"},
      {"backend-claims-bias-grad", "bias_grad",
       "f32 threw: backend 'matmul-only' does not implement bias_grad for f32"},
      {"backend-opaque-layout", "device",
       "activation_layout(bf16) is opaque: layers can only give row_major or nhwc activations"}};
  for (const auto& [fixture, check, detail] : cases) {
    const auto [status, report] = plugin_test(fixture_library(fixture));
    BOOST_TEST(status == 1, fixture << ":\n" << report);
    // Every fixture also fails `ops` (it implements matmul alone), which comes after `device`.
    const std::vector<std::string> failed =
        check == "device" ? std::vector<std::string>{"device", "ops"} : std::vector<std::string>{"ops", check};
    BOOST_TEST(failed_checks(report) == failed, fixture << ":\n" << report);
    BOOST_TEST(contains(report, detail), fixture << ":\n" << report);
  }
  // Without allocate and copy nothing the op groups judge means anything: they are not run.
  const std::string short_copy = plugin_test(fixture_library("backend-copy-short")).second;
  BOOST_TEST(contains(short_copy, "  -     suite   not run: the op checks move their data with allocate() and copy()"),
             short_copy);
  BOOST_TEST(!contains(short_copy, "  ok    matmul"), short_copy);
}
