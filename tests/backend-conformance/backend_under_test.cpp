// The backend under test and the suite's cases as Boost test cases (see backend_under_test.hpp).
#include "backend_under_test.hpp"

#include <boost/test/unit_test.hpp>

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <variant>

#include "../nn/nn_fixture.hpp"
#include "cli/backend_suite/suite.hpp"
#include "kiln/errors.hpp"

namespace kiln::conformance {
namespace {

std::shared_ptr<Backend>*& backend_slot() {
  static std::shared_ptr<Backend>* slot = nullptr;  // never destroyed, like the registry
  return slot;
}

/// KILN_CONFORMANCE_PARAMS="key=value ...": backend parameters to run the suite under. Each key
/// must be one of the backend's parameters; its value is read as the type of that parameter.
void set_from_environment(ParamMap& params, const std::string& backend_name) {
  const char* env = std::getenv("KILN_CONFORMANCE_PARAMS");
  if (env == nullptr) return;
  std::istringstream words(env);
  std::string word;
  while (words >> word) {
    const std::size_t eq = word.find('=');
    const std::string key = word.substr(0, eq), text = eq == std::string::npos ? "" : word.substr(eq + 1);
    const auto found = params.entries().find(key);
    if (eq == std::string::npos || found == params.entries().end()) {
      throw Error("conformance: KILN_CONFORMANCE_PARAMS: '" + word + "' is not key=value with a parameter of backend '" +
                  backend_name + "'");
    }
    const ParamValue& current = found->second.value;
    ParamValue value;
    std::int64_t number = 0;
    const auto [end, parse] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (std::holds_alternative<bool>(current) && (text == "true" || text == "false")) {
      value = text == "true";
    } else if (std::holds_alternative<std::int64_t>(current) && !text.empty() && parse == std::errc() &&
               end == text.data() + text.size()) {
      value = number;
    } else if (std::holds_alternative<std::string>(current)) {
      value = text;
    } else {
      throw Error("conformance: KILN_CONFORMANCE_PARAMS: " + word + " does not fit the type of backend '" +
                  backend_name + "''s parameter " + key);
    }
    params.set(key, value, "KILN_CONFORMANCE_PARAMS");
  }
}

/// One line per judgement, "conformance: <suite> <variant> <what> rel_err <e> tol <t> ok|FAIL",
/// which scripts/gpu-check.sh summarises; a failed judgement also fails the Boost test case.
void judge(const VariantResult& running, const CheckResult& check) {
  std::cout << "conformance: " << running.suite << ' ' << running.name << ' ' << check.what << " rel_err "
            << check.error << " tol " << check.tolerance << (check.ok ? " ok" : " FAIL") << '\n';
  BOOST_TEST(check.ok, check.message);
}

}  // namespace

Backend& backend_under_test() {
  if (backend_slot() == nullptr) throw Error("conformance: no backend was made (main.cpp makes it first)");
  return **backend_slot();
}

void make_backend_under_test(const std::string& name) {
  ParamMap params = test::plugin_params(KILN_KIND_BACKEND, name, "");
  if (params.contains("allow_tf32")) params.set("allow_tf32", false, "conformance suite (f32 accuracy)");
  // scripts/gpu-check.sh reruns the convolution cases with algorithms chosen by timing
  // (cudnn_benchmark: cudnnFind* may pick algorithms the heuristics never rank first) and with
  // f32 Winograd/FFT refused (conv_transforms = false); the default allows them, and they must
  // meet the f32 tolerance either way.
  set_from_environment(params, name);
  static ParamMap kept("backend");  // PluginArgs holds a pointer: keep the map for the backend's life
  kept = params;
  PluginArgs args;
  args.params = &kept;
  const auto& info = test::registry().require(KILN_KIND_BACKEND, name, "backend");
  backend_slot() = new std::shared_ptr<Backend>(test::registry().create_backend(info, args));
}

void add_suite_cases() {
  namespace ut = boost::unit_test;
  for (const CaseSpec& spec : all_cases()) {
    ut::test_suite* suite = BOOST_TEST_SUITE(spec.suite);
    for (const Variant& variant : variants_of(spec)) {
      ut::test_case* tc = ut::make_test_case(
          [&spec, variant] {
            const VariantResult result = run_variant(backend_under_test(), spec, variant, judge);
            BOOST_TEST(result.threw.empty(), spec.suite << ' ' << result.name << " threw: " << result.threw);
            BOOST_TEST(!result.checks.empty(), spec.suite << ' ' << result.name << " judged nothing");
          },
          variant_name(spec, variant), __FILE__, __LINE__);
      const std::string reason = unsupported_reason(backend_under_test(), spec, variant);
      if (!reason.empty()) {
        tc->add_precondition([reason](ut::test_unit_id) {
          boost::test_tools::assertion_result r(false);
          r.message() << reason;
          return r;
        });
      }
      suite->add(tc);
    }
    ut::framework::master_test_suite().add(suite);
  }
}

}  // namespace kiln::conformance
