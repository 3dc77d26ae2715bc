// The conformance suite for the in-tree communicators (see comm_conformance.hpp).
#include "comm_conformance.hpp"

#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include "comm_fixture.hpp"
#include "kiln/dist/memory_store.hpp"

namespace kiln::test {

cli::CommSuiteSpec suite_spec(const CommSpec& spec) {
  cli::CommSuiteSpec s;
  s.make = [spec](const RankInfo& ranks) { return make_communicator(spec.plugin, spec.params, ranks); };
  s.dtypes = spec.dtypes;
  return s;
}

std::vector<CaseResult> run_conformance(const CommSpec& spec, const RankPlacement& placement, Store* store,
                                        std::chrono::milliseconds timeout) {
  return cli::run_comm_suite(suite_spec(spec), placement, store, cpu(), timeout);
}

std::vector<CaseResult> run_conformance(const CommSpec& spec, int world, std::chrono::milliseconds timeout) {
  kiln::dist::MemoryStore store(world);
  return run_conformance(spec, threads_in_this_process(world), &store, timeout);
}

void check_results(const CommSpec& spec, int world, const std::vector<CaseResult>& results) {
  std::int64_t checked = 0;
  std::int64_t wrong = 0;
  for (const auto& r : results) {
    BOOST_CHECK_MESSAGE(r.ok(), fmt::format("{} world {}: {}: #wrong {} of {}; {}", spec.label, world,
                                            r.name, r.wrong, r.checked, r.detail));
    checked += r.checked;
    wrong += r.wrong;
  }
  BOOST_TEST_MESSAGE(fmt::format("{} world {}: {} cases, {} elements checked, #wrong {}", spec.label,
                                 world, results.size(), checked, wrong));
}

void check_conformance(const CommSpec& spec, int world) { check_results(spec, world, run_conformance(spec, world)); }

}  // namespace kiln::test
