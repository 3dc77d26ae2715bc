// Before a multi-rank run trains, every rank checks that it runs what rank 0 runs.
//
// Why: ranks that differ fail late and obscurely, or not at all. A node with an older config
// (not on a shared file system) trains with another learning rate, and the ranks' weights drift
// apart with no error; a node whose copy of the dataset has 59,000 samples instead of 60,000 runs
// fewer steps and hangs at the end of the epoch; a node with a stale install of a plugin computes
// the same names with different code. PyTorch and Horovod check none of this.
//
// What is compared (run_facts.hpp builds it):
//   - must match, else every rank stops with a ConfigError naming the ranks, keys and values:
//     Kiln's version and contract, each plugin's name and version, every resolved config key
//     except those that change only speed or logging ([log], [backend] but its type,
//     loader.workers, loader.prefetch) and keys of type path (a dataset or weights file may sit
//     at another path on each node; run_facts.cpp says why that is safe), each data split's sample
//     count, shape, dtype, classes and class names, and what the command line decides for all
//     ranks (--check-sharding, the checkpoint --resume continues);
//   - close, else the same error: a digest of a few samples of each split, read through the data
//     plugin (labels exactly; sums of the values to a relative 1e-5, so CPUs that round the last
//     bit differently still agree): the same files in the same order, wherever they are;
//   - should match, else a warning on rank 0: the build id of each library (plugin/build_id.hpp).
//     The same version built twice differs here; results may then differ in the last bits.
//
// How: each rank puts its facts into the rendezvous store; rank 0 reads them all, compares each
// with its own and publishes one verdict, which every rank reads; so all ranks fail together,
// with the same message. A world of one rank skips all of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/store.hpp"

namespace kiln::train {

struct RankFacts {
  std::map<std::string, std::string> must_match;
  std::map<std::string, std::vector<double>> close;  ///< per sample: label, sum, sum of |x|, weighted sum
  std::map<std::string, std::string> should_match;
};

/// The facts as bytes for the store, and back. decode() throws CommError on bytes encode() did
/// not write, naming `from` ("rank 3's facts").
std::vector<std::uint8_t> encode(const RankFacts& facts);
RankFacts decode(const std::vector<std::uint8_t>& bytes, const std::string& from);

/// How `other` differs from `rank0`: errors ("optimizer.lr = 0.01 where rank 0 has 0.001") and
/// warnings. Both empty when they agree.
struct FactDifferences {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
};
FactDifferences compare(const RankFacts& rank0, const RankFacts& other);

/// Whether two sample digests agree (same labels, sums within the tolerance above).
bool digests_agree(const std::vector<double>& a, const std::vector<double>& b);

/// The verdict rank 0 publishes from every rank's differences (index = rank; rank 0's empty):
/// "" when no rank differs, else one message naming each differing rank (the first few) and
/// what differs.
std::string agreement_verdict(const std::vector<FactDifferences>& by_rank);

/// What a passed check found, for the banner: rank 0's warnings (one per rank and library built
/// differently) and the number of facts compared.
struct Agreement {
  std::vector<std::string> warnings;
  std::size_t facts = 0;
};

/// Exchanges `mine` through `store` and throws ConfigError (the same text on every rank) when any
/// rank's facts differ from rank 0's. Waits up to `timeout` for each rank (CommError names the
/// missing ones). First refuses a store that already holds this rank's facts, naming it as
/// `store_name` (dist::refuse_earlier_keys: a `file:` directory an earlier run left keys in).
Agreement check_ranks_agree(Store& store, const RankInfo& ranks, const RankFacts& mine,
                            std::chrono::milliseconds timeout, const std::string& store_name = "the rendezvous store");

}  // namespace kiln::train
