// The communicator conformance suite: every communicator plugin runs the same cases, one thread
// per rank over a MemoryStore, every element checked against an exact expected value.
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
#include <string>
#include <vector>

#include "kiln/communicator.hpp"
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

/// Connects `world` communicators of `spec` (one thread per rank, one MemoryStore), runs every
/// case and returns the results; a failed connect is one failed case. Runs on the calling
/// thread apart from the rank threads; asserts nothing itself.
std::vector<CaseResult> run_conformance(const CommSpec& spec, int world,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// Runs run_conformance and BOOST_CHECKs every case (call from a test case body).
void check_conformance(const CommSpec& spec, int world);

}  // namespace kiln::test
