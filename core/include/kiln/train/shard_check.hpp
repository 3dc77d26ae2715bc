// What each rank reads, said and checked (user pain #8 in conventions.md: ranks that train on the
// same samples, or an order that never changes between epochs).
//
// Kiln owns sharding: every rank computes the epoch's order from (seed, epoch) and takes its own
// rows of each global batch (kiln/data/data_loader.hpp), and the ranks' agreement check
// (rank_agreement.hpp) makes sure they compute it from the same numbers. So a rank's share can
// only be wrong through a bug. Two things let a user see it is right anyway:
//   - shard_line(): every rank logs one line at the start: how many samples it reads per epoch,
//     the first few, and a digest of its whole list;
//   - `kiln train --check-sharding`: before training, the ranks all-gather the sample indices
//     each of them will read in the first two epochs and check that every sample is read by
//     exactly one rank (except those last_batch = "drop" leaves out), and that the second
//     epoch's order differs from the first's. It costs one all_gather of 8 bytes per sample per
//     epoch checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/data/data_loader.hpp"

namespace kiln::train {

/// The valid sample indices of this rank's batches in `epoch`, step after step; each step holds
/// `batch` entries, rows that are padding or absent (a short last batch) are -1.
std::vector<std::int64_t> rank_epoch_list(const data::Sharder& sharder, std::int64_t epoch);

/// "rank 1/4 reads 15000 of 60000 samples per epoch (234 steps of 64; last_batch = \"drop\" leaves
/// 96 out); epoch 1 starts with samples 40113, 2291, 57702, list digest 5c0e2b91".
std::string shard_line(const data::Sharder& sharder, std::int64_t epoch);

/// Checks one epoch from every rank's list (index = rank, each from rank_epoch_list()). Returns
/// the samples left out (by last_batch = "drop"); throws DataError naming the first sample read
/// by two ranks (or twice by one), outside the source, or never read though it should be.
std::int64_t verify_epoch(const std::vector<std::vector<std::int64_t>>& lists, const data::ShardOptions& shard,
                          std::int64_t epoch);

/// --check-sharding: all-gathers every rank's lists for `first_epoch` and the epoch after it (if
/// `epochs` has one) and verifies them; returns the line rank 0 logs. Throws DataError as
/// verify_epoch() does, and when a shuffled second epoch has the first's order.
std::string check_sharding(Backend& backend, Communicator& comm, const data::ShardOptions& shard,
                           std::int64_t first_epoch, std::int64_t epochs);

}  // namespace kiln::train
