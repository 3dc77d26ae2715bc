// What each rank reads (kiln/train/shard_check.hpp): the per-rank lists under each last-batch
// policy, the startup line, and verify_epoch()'s verdicts on lists that are right and on lists
// with a sample read twice, one out of range and one never read. The all_gather across real
// ranks runs in tests/multirank (ranks_reading_the_same_samples_from_other_paths_train).
#include <boost/test/unit_test.hpp>

#include <string>

#include <fmt/format.h>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/train/shard_check.hpp"

namespace {

using namespace kiln;
using kiln::data::LastBatch;

data::ShardOptions options(std::int64_t count, std::int64_t batch, int world, LastBatch policy, int rank = 0) {
  data::ShardOptions o;
  o.count = count;
  o.batch = batch;
  o.world_size = world;
  o.rank = rank;
  o.last_batch = policy;
  o.seed = 7;
  return o;
}

std::vector<std::vector<std::int64_t>> all_lists(const data::ShardOptions& o, std::int64_t epoch) {
  std::vector<std::vector<std::int64_t>> lists;
  for (int r = 0; r < o.world_size; ++r) {
    data::ShardOptions mine = o;
    mine.rank = r;
    lists.push_back(train::rank_epoch_list(data::Sharder(mine), epoch));
  }
  return lists;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shard_check)

BOOST_AUTO_TEST_CASE(every_policy_reads_each_sample_once_except_drops_remainder) {
  // 23 samples, 3 ranks of 4: drop runs 1 step and leaves 11 out; pad and partial run 2 steps.
  const auto drop = options(23, 4, 3, LastBatch::drop);
  BOOST_TEST(train::verify_epoch(all_lists(drop, 0), drop, 0) == 11);
  for (LastBatch policy : {LastBatch::pad, LastBatch::partial}) {
    const auto o = options(23, 4, 3, policy);
    const auto lists = all_lists(o, 1);
    BOOST_TEST(lists[0].size() == 8u);
    BOOST_TEST(train::verify_epoch(lists, o, 1) == 0);
    // Rank 2's second step holds 23 - 4*3 - 2*4 = 3 real rows; the fourth is -1.
    BOOST_TEST(lists[2][6] >= 0);
    BOOST_TEST(lists[2][7] == -1);
  }
}

BOOST_AUTO_TEST_CASE(wrong_lists_are_named) {
  const auto o = options(12, 2, 2, LastBatch::drop);
  auto lists = all_lists(o, 0);
  auto twice = lists;
  twice[1][3] = twice[0][1];  // rank 1's step 2 reads rank 0's step 1 sample
  BOOST_CHECK_EXCEPTION(train::verify_epoch(twice, o, 0), DataError, [&](const DataError& e) {
    const std::string want = fmt::format("in epoch 1, sample {} would be read twice: by rank 0 at step 1 and by rank 1 "
                                         "at step 2",
                                         lists[0][1]);
    return std::string(e.what()).find(want) != std::string::npos;
  });
  auto outside = lists;
  outside[0][0] = 12;
  BOOST_CHECK_EXCEPTION(train::verify_epoch(outside, o, 0), DataError, [](const DataError& e) {
    return std::string(e.what()).find("rank 0 would read sample 12 at step 1, outside the 12 samples") !=
           std::string::npos;
  });
  auto missing = lists;
  const std::int64_t lost = missing[1][0];
  missing[1][0] = -1;
  BOOST_CHECK_EXCEPTION(train::verify_epoch(missing, o, 0), DataError, [&](const DataError& e) {
    return std::string(e.what()).find(fmt::format("1 samples would never be read (first: sample {})", lost)) !=
           std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(the_startup_line_counts_and_names_the_first_samples) {
  const auto o = options(23, 4, 3, LastBatch::drop, 1);
  const data::Sharder sharder(o);
  const auto list = train::rank_epoch_list(sharder, 0);
  const std::string line = train::shard_line(sharder, 0);
  BOOST_TEST(line.find(fmt::format("rank 1/3 reads 4 of 23 samples per epoch (1 steps of 4; last_batch = \"drop\" "
                                   "leaves 11 out); epoch 1 starts with samples {}, {}, {}, list digest ",
                                   list[0], list[1], list[2])) == 0u,
             line);
  BOOST_TEST(line != train::shard_line(sharder, 1));  // another epoch, another order
}

BOOST_AUTO_TEST_SUITE_END()
