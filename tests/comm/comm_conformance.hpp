// The communicator conformance suite (core/cli/comm_suite.hpp, which `kiln plugins test` runs
// too) for the in-tree plugins, loaded through the registry as a run loads them, with the
// results turned into Boost.Test checks.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cli/comm_suite.hpp"

namespace kiln::test {

using cli::CaseResult;
using cli::RankPlacement;
using cli::threads_in_this_process;

/// One in-tree communicator configuration under test.
struct CommSpec {
  std::string plugin;        ///< "gloo", "local"
  std::string params;        ///< [comm] table body, e.g. "algorithm = \"ring\"\ninterface = \"lo\""
  std::string label;         ///< "gloo ring", for messages
  std::vector<DType> dtypes; ///< the dtypes its all_reduce accepts
};

/// The suite's spec for `spec`: communicators made by the registry from its [comm] table.
cli::CommSuiteSpec suite_spec(const CommSpec& spec);

/// Runs the suite for `spec` over `placement` (rendezvous through `store`; the cpu backend);
/// asserts nothing.
std::vector<CaseResult> run_conformance(const CommSpec& spec, const RankPlacement& placement, Store* store,
                                        std::chrono::milliseconds timeout);

/// The same with `world` threads of this process over one MemoryStore.
std::vector<CaseResult> run_conformance(const CommSpec& spec, int world,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// BOOST_CHECKs every case of `results` (call from a test case body).
void check_results(const CommSpec& spec, int world, const std::vector<CaseResult>& results);

/// Runs run_conformance(spec, world) and check_results (call from a test case body).
void check_conformance(const CommSpec& spec, int world);

}  // namespace kiln::test
