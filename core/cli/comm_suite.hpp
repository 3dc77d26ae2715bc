// The communicator conformance suite: the cases `kiln plugins test` runs on a communicator plugin
// and Kiln's own tests run on the in-tree ones (tests/comm), every element checked against an
// exact expected value. Ranks are threads of one process over an in-memory store
// (threads_in_this_process), or one process per rank (the mpi tests' RankPlacement).
//
// Cases per world: all_reduce for every dtype x op (sum, avg, max, min) x count (0, 1, 7 and
// 1000003, which spans several of Gloo's 1 MiB segments); results bit-identical on every rank
// for non-integer inputs; broadcast from root 0 and from the last rank; all_gather; barrier;
// three all_reduces in flight, waited in another order. Inputs are small integers (avg: multiples
// of the world size) so every partial sum is exact in f16 and bf16 and any reduction order must
// give the expected value exactly. Each case reports a #wrong count, as nccl-tests does.
//
// Tensors live in host memory, made and read by `backend` on the calling thread only (the
// Backend contract); rank threads only call the communicators.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/store.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cli {

/// One communicator configuration under test.
struct CommSuiteSpec {
  /// Makes rank `ranks.rank`'s communicator (not yet connected).
  std::function<std::shared_ptr<Communicator>(const RankInfo& ranks)> make;
  std::vector<DType> dtypes;  ///< the dtypes its all_reduce is checked in
  std::vector<ReduceOp> ops = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};
  /// Called with each case's name as it starts (optional): a watchdog's view of where a run is.
  std::function<void(const std::string& name)> on_case;
};

/// Outcome of one case over all ranks.
struct CaseResult {
  std::string name;          ///< "all_reduce f16 x 7 avg"
  std::int64_t checked = 0;  ///< elements verified, all ranks together
  std::int64_t wrong = 0;    ///< of those, how many differ from the expected value
  std::string detail;        ///< first mismatch ("rank 2 [5]: got 3, want 4") or a rank's error
  /// Connect only: every local rank threw, as a communicator does for a world size it does not
  /// run (`local` beyond one rank); `detail` holds the lowest rank's message.
  bool refused = false;
  bool ok() const { return wrong == 0 && detail.empty(); }
};

/// Where a run's ranks live and how the cases see the other processes' ranks. Threads of one
/// process (threads_in_this_process) or one rank per process (tests/comm/test_mpi_conformance.cpp).
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

  bool hosts(int rank) const;
};

/// All `world` ranks as threads of this process.
RankPlacement threads_in_this_process(int world);

/// Connects the local ranks' communicators of `spec` (rendezvous through `store`, `backend` as
/// their backend), runs every case and returns the merged results, the first being the connect;
/// a failed connect ends the run there. Asserts nothing.
std::vector<CaseResult> run_comm_suite(const CommSuiteSpec& spec, const RankPlacement& placement, Store* store,
                                       Backend& backend, std::chrono::milliseconds timeout);

/// Runs body(rank) on one thread per rank and waits for all; returns each rank's exception
/// message ("" when it returned normally).
std::vector<std::string> run_ranks(int world, const std::function<void(int rank)>& body);

/// Host tensor of `dtype` holding values[i] (f32/f16/bf16 through the backend's rounding cast;
/// f64 and integer dtypes by static_cast).
Tensor make_host_tensor(Backend& backend, const std::vector<double>& values, DType dtype);
/// The elements of a host tensor of any dtype as doubles (exact widening).
std::vector<double> read_host_values(Backend& backend, const Tensor& t);

/// Rank `r` of `world` on one host (local rank = rank), as threads or processes of one machine are.
RankInfo rank_of(int r, int world, const std::string& source);

}  // namespace kiln::cli
