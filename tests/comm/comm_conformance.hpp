// The communicator conformance suite: every communicator plugin runs the same cases, every
// element checked against an exact expected value. Ranks are threads of this process over a
// MemoryStore (local, gloo), or one process per rank (mpi, under mpirun: RankPlacement).
//
// Cases per world: all_reduce for every dtype x op (sum, avg, max, min) x count (0, 1, 7 and
// 1000003, which spans several of Gloo's 1 MiB segments); results bit-identical on every rank
// for non-integer inputs; broadcast from root 0 and from the last rank; all_gather; barrier;
// three all_reduces in flight, waited in another order. Inputs are small integers (avg: multiples
// of the world size) so every partial sum is exact in f16 and bf16 and any reduction order must
// give the expected value exactly. Each case reports a #wrong count, as nccl-tests does.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/store.hpp"
#include "kiln/tensor.hpp"

namespace kiln::test {

/// One communicator configuration under test.
struct CommSpec {
  std::string plugin;        ///< "gloo", "local"
  std::string params;        ///< [comm] table body, e.g. "algorithm = \"ring\"\ninterface = \"lo\""
  std::string label;         ///< "gloo ring", for messages
  std::vector<DType> dtypes; ///< the dtypes its all_reduce accepts
  std::vector<ReduceOp> ops = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};
};

/// Outcome of one case over all ranks.
struct CaseResult {
  std::string name;          ///< "all_reduce f16 x 7 avg"
  std::int64_t checked = 0;  ///< elements verified, all ranks together
  std::int64_t wrong = 0;    ///< of those, how many differ from the expected value
  std::string detail;        ///< first mismatch ("rank 2 [5]: got 3, want 4") or a rank's error
  bool ok() const { return wrong == 0 && detail.empty(); }
};

/// Where a run's ranks live and how the cases see the other processes' ranks. Threads of one
/// process (threads_in_this_process) or one rank per process (test_mpi_conformance.cpp).
struct RankPlacement {
  int world = 1;
  std::vector<int> local;  ///< ranks hosted by this process, ascending
  /// Runs body(rank) for every local rank, concurrently; each rank's exception text, indexed by
  /// rank ("" where it returned normally or is not local).
  std::function<std::vector<std::string>(const std::function<void(int rank)>&)> run;
  /// Rank 0's values on every process (`mine` is rank 0's where rank 0 is local).
  std::function<std::vector<double>(const std::vector<double>& mine)> from_rank0;
  /// Barrier case: `rank` counts itself in for `round` (before the barrier); arrived(round) says
  /// how many ranks of the whole world have (read after it).
  std::function<void(int rank, int round)> arrive;
  std::function<int(int round)> arrived;
  /// Combines every process's results into the whole world's (identical on every process).
  std::function<void(std::vector<CaseResult>&)> merge;

  bool hosts(int rank) const {
    for (const int r : local) {
      if (r == rank) return true;
    }
    return false;
  }
};

/// All `world` ranks as threads of this process.
RankPlacement threads_in_this_process(int world);

/// Connects the local ranks' communicators of `spec` (rendezvous through `store`), runs every
/// case and returns the merged results; a failed connect is one failed case. Asserts nothing.
std::vector<CaseResult> run_conformance(const CommSpec& spec, const RankPlacement& placement, Store* store,
                                        std::chrono::milliseconds timeout);

/// Connects `world` communicators of `spec` (one thread per rank, one MemoryStore), runs every
/// case and returns the results; a failed connect is one failed case. Runs on the calling
/// thread apart from the rank threads; asserts nothing itself.
std::vector<CaseResult> run_conformance(const CommSpec& spec, int world,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// BOOST_CHECKs every case of `results` (call from a test case body).
void check_results(const CommSpec& spec, int world, const std::vector<CaseResult>& results);

/// Runs run_conformance(spec, world) and check_results (call from a test case body).
void check_conformance(const CommSpec& spec, int world);

}  // namespace kiln::test
