// Tests of the Sharder (pure sharding arithmetic) and the DataLoader (threads, prefetch ring).
//
// An in-test DataSource writes each sample as [index, seed] (i64) with label index % 7, so every
// row of every batch can be checked against the Sharder and derive_seed. Anything that could
// hang (shutdown mid-epoch, abandoning an epoch) runs under a wall-clock guard that fails the
// test process instead of hanging it.
#define KILN_TEST_MODULE test_data_loader
#include "kiln_test_main.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "kiln/backend.hpp"
#include "kiln/data/data_loader.hpp"
#include "kiln/errors.hpp"
#include "kiln/rng.hpp"
#include "../support/alloc_only_backend.hpp"

using kiln::data::BatchIndices;
using kiln::data::DataLoader;
using kiln::data::LastBatch;
using kiln::data::LoaderOptions;
using kiln::data::Sharder;
using kiln::data::ShardOptions;
using kiln::data::Shuffle;

namespace {

// Sample i = [i, seed] as i64, label i % 7; optionally throws at one index or sleeps per read.
class CountingSource final : public kiln::DataSource {
 public:
  explicit CountingSource(std::int64_t count, std::int64_t fail_at = -1,
                          std::chrono::microseconds delay = std::chrono::microseconds(0))
      : count_(count), fail_at_(fail_at), delay_(delay) {}
  std::string_view name() const override { return "counting"; }
  kiln::DatasetInfo describe() const override {
    return kiln::DatasetInfo{{2}, kiln::DType::i64, 7, count_, "counting test source"};
  }
  void read(std::int64_t index, std::uint64_t seed, const kiln::SampleSlot& out) const override {
    reads_.fetch_add(1);
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (index == fail_at_) {
      throw kiln::DataError(fmt::format("counting: sample {} is corrupt (test)", index));
    }
    // Boost.Test assertions are not thread-safe; a plain throw reaches next() instead.
    if (out.bytes != 2 * sizeof(std::int64_t)) throw std::logic_error("wrong slot size");
    auto* p = static_cast<std::int64_t*>(out.data);
    p[0] = index;
    p[1] = static_cast<std::int64_t>(seed);
    *out.label = static_cast<std::int32_t>(index % 7);
  }
  std::int64_t reads() const { return reads_.load(); }

 private:
  std::int64_t count_;
  std::int64_t fail_at_;
  std::chrono::microseconds delay_;
  mutable std::atomic<std::int64_t> reads_{0};
};

ShardOptions shard(std::int64_t count, std::int64_t batch, int rank, int world, LastBatch policy,
                   std::uint64_t seed = 42, Shuffle shuffle = Shuffle::yes) {
  ShardOptions o;
  o.count = count;
  o.batch = batch;
  o.rank = rank;
  o.world_size = world;
  o.last_batch = policy;
  o.shuffle = shuffle;
  o.seed = seed;
  return o;
}

LoaderOptions loader_options(const ShardOptions& s, int workers, int prefetch) {
  LoaderOptions o;
  o.shard = s;
  o.workers = workers;
  o.prefetch = prefetch;
  return o;
}

template <class E>
std::function<bool(const E&)> message_has(std::string expected) {
  return [expected](const E& e) {
    const bool ok = std::string(e.what()).find(expected) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("message was: " << e.what());
    return ok;
  };
}

// Runs `fn` on its own thread; if it has not finished within `limit`, the whole test process
// fails at once (a hang must never stall CI), otherwise its exception, if any, is rethrown.
template <class Fn>
void within_deadline(const char* what, Fn fn, std::chrono::seconds limit = std::chrono::seconds(60)) {
  auto promise = std::make_shared<std::promise<void>>();
  std::future<void> done = promise->get_future();
  std::thread([promise, fn]() mutable {
    try {
      fn();
      promise->set_value();
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  }).detach();
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: %s did not finish within %lld s: the data loader hangs\n", what,
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(3);
  }
  done.get();
}

// One decoded batch, copied out of the loader's ring.
struct Rows {
  std::vector<std::int64_t> index, seed;
  std::vector<std::int32_t> label;
  std::int64_t valid = 0, global_rows = 0, global_valid = 0, step = 0;
  bool operator==(const Rows&) const = default;
};

Rows copy_rows(const kiln::data::Batch& b) {
  Rows r;
  const auto* x = b.inputs.data_as<std::int64_t>();
  const auto* y = b.labels.data_as<std::int32_t>();
  for (std::int64_t i = 0; i < b.rows; ++i) {
    r.index.push_back(x[2 * i]);
    r.seed.push_back(x[2 * i + 1]);
    r.label.push_back(y[i]);
  }
  r.valid = b.valid_rows;
  r.global_rows = b.global_rows;
  r.global_valid = b.global_valid;
  r.step = b.step;
  return r;
}

std::vector<Rows> run_epoch(DataLoader& loader, std::int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Rows> out;
  while (auto b = loader.next()) {
    BOOST_REQUIRE_EQUAL(b->epoch, epoch);
    BOOST_REQUIRE_EQUAL(b->step, static_cast<std::int64_t>(out.size()));
    BOOST_REQUIRE_GE(b->wait_seconds, 0.0);
    out.push_back(copy_rows(*b));
  }
  return out;
}

}  // namespace

// ---- parse_last_batch and Sharder errors --------------------------------------------------

BOOST_AUTO_TEST_CASE(parses_last_batch_policies) {
  BOOST_CHECK(kiln::data::parse_last_batch("drop", "loader.last_batch") == LastBatch::drop);
  BOOST_CHECK(kiln::data::parse_last_batch("pad", "loader.last_batch") == LastBatch::pad);
  BOOST_CHECK(kiln::data::parse_last_batch("partial", "loader.last_batch") == LastBatch::partial);
  BOOST_CHECK_EXCEPTION(kiln::data::parse_last_batch("keep", "loader.last_batch (run.toml:9)"),
                        kiln::ConfigError,
                        message_has<kiln::ConfigError>(
                            "loader.last_batch (run.toml:9): unknown last-batch policy \"keep\"; "
                            "use \"drop\""));
}

BOOST_AUTO_TEST_CASE(sharder_rejects_bad_options) {
  BOOST_CHECK_EXCEPTION(Sharder(shard(10, 0, 0, 1, LastBatch::drop)), kiln::ConfigError,
                        message_has<kiln::ConfigError>("loader batch size is 0; it must be at least 1"));
  BOOST_CHECK_EXCEPTION(Sharder(shard(10, 2, 0, 0, LastBatch::drop)), kiln::ConfigError,
                        message_has<kiln::ConfigError>("world size is 0"));
  BOOST_CHECK_EXCEPTION(Sharder(shard(10, 2, 4, 4, LastBatch::drop)), kiln::ConfigError,
                        message_has<kiln::ConfigError>("rank 4 is out of range for a world of size 4 (valid: 0..3)"));
  BOOST_CHECK_EXCEPTION(Sharder(shard(10, 2, -1, 4, LastBatch::drop)), kiln::ConfigError,
                        message_has<kiln::ConfigError>("rank -1 is out of range"));
  BOOST_CHECK_EXCEPTION(Sharder(shard(7, 2, 0, 4, LastBatch::drop)), kiln::ConfigError,
                        message_has<kiln::ConfigError>(
                            "last_batch = \"drop\" leaves no step: 7 samples < batch 2 x world size 4 = 8"));
  BOOST_CHECK_EXCEPTION(Sharder(shard(0, 2, 0, 1, LastBatch::pad)), kiln::DataError,
                        message_has<kiln::DataError>("the data source has 0 samples"));
  BOOST_CHECK_EQUAL(Sharder(shard(7, 2, 0, 4, LastBatch::pad)).steps_per_epoch(), 1);
  BOOST_CHECK_EQUAL(Sharder(shard(7, 2, 0, 4, LastBatch::partial)).steps_per_epoch(), 1);
}

// ---- the epoch permutation -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(epoch_order_is_a_seeded_permutation_shared_by_all_ranks) {
  const std::int64_t n = 1000;
  const Sharder r0(shard(n, 8, 0, 4, LastBatch::drop));
  const Sharder r3(shard(n, 8, 3, 4, LastBatch::drop));
  const auto e0 = r0.epoch_order(0);
  const auto e1 = r0.epoch_order(1);
  BOOST_TEST(e0 == r3.epoch_order(0), boost::test_tools::per_element());  // same on every rank
  BOOST_TEST(e0 == Sharder(shard(n, 3, 0, 1, LastBatch::pad)).epoch_order(0),
             boost::test_tools::per_element());  // depends on (seed, epoch) only
  BOOST_CHECK(e0 != e1);                          // reshuffled per epoch
  BOOST_CHECK(e0 != Sharder(shard(n, 8, 0, 4, LastBatch::drop, 43)).epoch_order(0));
  for (const auto& order : {e0, e1}) {
    std::vector<std::int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (std::int64_t i = 0; i < n; ++i) BOOST_REQUIRE_EQUAL(sorted[static_cast<std::size_t>(i)], i);
  }
  const auto identity = Sharder(shard(n, 8, 0, 4, LastBatch::drop, 42, Shuffle::no)).epoch_order(5);
  for (std::int64_t i = 0; i < n; ++i) BOOST_REQUIRE_EQUAL(identity[static_cast<std::size_t>(i)], i);

  // Pinned values: the order is part of reproducibility across versions and platforms.
  const auto small = Sharder(shard(10, 1, 0, 1, LastBatch::drop, 42)).epoch_order(0);
  BOOST_TEST(small == (std::vector<std::int64_t>{2, 1, 7, 5, 3, 0, 4, 8, 6, 9}), boost::test_tools::per_element());
}

// ---- sharding over a grid of (count, B, W) and every policy --------------------------------

BOOST_AUTO_TEST_CASE(shards_are_disjoint_covering_and_step_counts_match) {
  for (LastBatch policy : {LastBatch::drop, LastBatch::pad, LastBatch::partial}) {
    for (std::int64_t count : {1, 2, 5, 7, 16, 17, 33}) {
      for (std::int64_t batch : {1, 2, 3, 5}) {
        for (int world : {1, 2, 3, 4}) {
          BOOST_TEST_CONTEXT("policy " << static_cast<int>(policy) << " count " << count
                                       << " B " << batch << " W " << world) {
            const std::int64_t global = batch * world;
            if (policy == LastBatch::drop && count < global) {
              BOOST_CHECK_THROW(Sharder(shard(count, batch, 0, world, policy)), kiln::ConfigError);
              continue;
            }
            std::vector<Sharder> ranks;
            for (int r = 0; r < world; ++r) ranks.emplace_back(shard(count, batch, r, world, policy));
            const std::int64_t steps = ranks[0].steps_per_epoch();
            const std::int64_t expected_steps =
                policy == LastBatch::drop ? count / global : (count + global - 1) / global;
            BOOST_REQUIRE_EQUAL(steps, expected_steps);
            for (const Sharder& s : ranks) BOOST_REQUIRE_EQUAL(s.steps_per_epoch(), steps);

            const std::int64_t epoch = 3;
            const auto order = ranks[0].epoch_order(epoch);
            std::map<std::int64_t, int> seen;  // valid sample -> times seen
            for (std::int64_t step = 0; step < steps; ++step) {
              std::int64_t rows = 0, valid = 0;
              std::vector<BatchIndices> at_step;
              for (const Sharder& s : ranks) at_step.push_back(s.batch(epoch, step));
              for (const BatchIndices& b : at_step) {
                const auto n = static_cast<std::int64_t>(b.indices.size());
                BOOST_REQUIRE_LE(b.valid, n);
                if (policy != LastBatch::partial) BOOST_REQUIRE_EQUAL(n, batch);
                if (policy != LastBatch::pad) BOOST_REQUIRE_EQUAL(b.valid, n);
                for (std::int64_t k = 0; k < b.valid; ++k) ++seen[b.indices[static_cast<std::size_t>(k)]];
                for (std::int64_t idx : b.indices) BOOST_REQUIRE(idx >= 0 && idx < count);
                rows += n;
                valid += b.valid;
                // every rank agrees on the step's totals
                BOOST_REQUIRE_EQUAL(b.global_rows, at_step[0].global_rows);
                BOOST_REQUIRE_EQUAL(b.global_valid, at_step[0].global_valid);
              }
              BOOST_REQUIRE_EQUAL(at_step[0].global_rows, rows);
              BOOST_REQUIRE_EQUAL(at_step[0].global_valid, valid);
            }
            for (const auto& [idx, times] : seen) BOOST_REQUIRE_EQUAL(times, 1);  // disjoint
            if (policy == LastBatch::drop) {
              BOOST_REQUIRE_EQUAL(static_cast<std::int64_t>(seen.size()), steps * global);
              // exactly the first steps*W*B positions of the epoch's order
              for (std::int64_t p = 0; p < steps * global; ++p) {
                BOOST_REQUIRE_EQUAL(seen.count(order[static_cast<std::size_t>(p)]), 1u);
              }
            } else {
              BOOST_REQUIRE_EQUAL(static_cast<std::int64_t>(seen.size()), count);  // covering
            }
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(pad_wraps_to_the_start_of_the_order_and_marks_padding_last) {
  // count 5, B 2, W 2: one full step of 4, then positions 4 (real) and 5..7 (wrapped 0..2).
  const std::vector<std::int64_t> order = Sharder(shard(5, 2, 0, 2, LastBatch::pad)).epoch_order(0);
  const BatchIndices r0 = Sharder(shard(5, 2, 0, 2, LastBatch::pad)).batch(0, 1);
  const BatchIndices r1 = Sharder(shard(5, 2, 1, 2, LastBatch::pad)).batch(0, 1);
  BOOST_TEST(r0.indices == (std::vector<std::int64_t>{order[4], order[0]}), boost::test_tools::per_element());
  BOOST_TEST(r1.indices == (std::vector<std::int64_t>{order[1], order[2]}), boost::test_tools::per_element());
  BOOST_CHECK_EQUAL(r0.valid, 1);
  BOOST_CHECK_EQUAL(r1.valid, 0);
  BOOST_CHECK_EQUAL(r0.global_rows, 4);
  BOOST_CHECK_EQUAL(r0.global_valid, 1);

  const BatchIndices p1 = Sharder(shard(5, 2, 1, 2, LastBatch::partial)).batch(0, 1);
  BOOST_CHECK(p1.indices.empty());  // an empty batch, but the rank still has the step
  BOOST_CHECK_EQUAL(p1.global_rows, 1);
}

// ---- the loader ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(loader_batches_match_the_sharder_with_seeds_and_labels) {
  for (LastBatch policy : {LastBatch::drop, LastBatch::pad, LastBatch::partial}) {
    for (int rank = 0; rank < 3; ++rank) {
      const ShardOptions s = shard(/*ignored: taken from the source*/ 0, 4, rank, 3, policy, 7);
      auto source = std::make_shared<CountingSource>(29);
      DataLoader loader(source, nullptr, loader_options(s, 2, 2));
      BOOST_CHECK_EQUAL(loader.info().count, 29);
      ShardOptions with_count = s;
      with_count.count = 29;
      const Sharder sharder(with_count);
      BOOST_REQUIRE_EQUAL(loader.steps_per_epoch(), sharder.steps_per_epoch());
      for (std::int64_t epoch : {0, 1}) {
        const std::vector<Rows> batches = run_epoch(loader, epoch);
        BOOST_REQUIRE_EQUAL(static_cast<std::int64_t>(batches.size()), sharder.steps_per_epoch());
        for (std::size_t step = 0; step < batches.size(); ++step) {
          const BatchIndices want = sharder.batch(epoch, static_cast<std::int64_t>(step));
          const Rows& got = batches[step];
          BOOST_TEST(got.index == want.indices, boost::test_tools::per_element());
          BOOST_CHECK_EQUAL(got.valid, want.valid);
          BOOST_CHECK_EQUAL(got.global_rows, want.global_rows);
          BOOST_CHECK_EQUAL(got.global_valid, want.global_valid);
          for (std::size_t k = 0; k < got.index.size(); ++k) {
            BOOST_CHECK_EQUAL(static_cast<std::uint64_t>(got.seed[k]),
                              kiln::derive_seed(7, static_cast<std::uint64_t>(epoch),
                                                static_cast<std::uint64_t>(got.index[k])));
            BOOST_CHECK_EQUAL(got.label[k], got.index[k] % 7);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(loader_output_does_not_depend_on_workers_or_prefetch) {
  for (LastBatch policy : {LastBatch::pad, LastBatch::partial}) {
    const ShardOptions s = shard(0, 5, 1, 2, policy, 11);
    auto source = std::make_shared<CountingSource>(97);
    std::vector<std::vector<Rows>> reference;
    {
      DataLoader one(source, nullptr, loader_options(s, 1, 1));
      for (std::int64_t e = 0; e < 3; ++e) reference.push_back(run_epoch(one, e));
    }
    for (auto [workers, prefetch] : {std::pair{4, 1}, std::pair{4, 3}, std::pair{3, 8}}) {
      DataLoader many(source, nullptr, loader_options(s, workers, prefetch));
      for (std::int64_t e = 0; e < 3; ++e) {
        BOOST_CHECK(run_epoch(many, e) == reference[static_cast<std::size_t>(e)]);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(loader_reuses_a_fixed_ring_of_pinned_buffers) {
  kiln::test::AllocOnlyBackend backend;
  auto source = std::make_shared<CountingSource>(200);
  DataLoader loader(source, &backend, loader_options(shard(0, 4, 0, 1, LastBatch::drop), 2, 3));
  BOOST_CHECK_EQUAL(backend.allocations.load(), 2 * (3 + 1));  // inputs + labels per slot
  BOOST_CHECK_EQUAL(backend.pinned.load(), 2 * (3 + 1));
  std::set<const void*> buffers;
  for (std::int64_t e = 0; e < 2; ++e) {
    loader.start_epoch(e);
    while (auto b = loader.next()) {
      BOOST_CHECK(b->inputs.memory() == kiln::MemoryKind::host_pinned);
      BOOST_TEST(b->inputs.shape() == (kiln::Shape{4, 2}), boost::test_tools::per_element());
      BOOST_TEST(b->labels.shape() == (kiln::Shape{4}), boost::test_tools::per_element());
      buffers.insert(b->inputs.data());
    }
  }
  BOOST_CHECK_EQUAL(backend.allocations.load(), 8);  // nothing allocated per batch
  BOOST_CHECK_EQUAL(buffers.size(), 4u);
}

BOOST_AUTO_TEST_CASE(loader_partial_batches_are_short_and_may_be_empty) {
  // count 9, B 4, W 2: step 1 has 1 sample -> rank 0 gets 1 row, rank 1 none.
  auto source = std::make_shared<CountingSource>(9);
  DataLoader r1(source, nullptr, loader_options(shard(0, 4, 1, 2, LastBatch::partial), 2, 2));
  const std::vector<Rows> batches = run_epoch(r1, 0);
  BOOST_REQUIRE_EQUAL(batches.size(), 2u);
  BOOST_CHECK_EQUAL(batches[0].index.size(), 4u);
  BOOST_CHECK_EQUAL(batches[1].index.size(), 0u);
  BOOST_CHECK_EQUAL(batches[1].global_rows, 1);
}

BOOST_AUTO_TEST_CASE(worker_exception_is_rethrown_by_next) {
  auto source = std::make_shared<CountingSource>(40, /*fail_at=*/13);
  DataLoader loader(source, nullptr,
                    loader_options(shard(0, 4, 0, 1, LastBatch::drop, 1, Shuffle::no), 3, 2));
  within_deadline("iterating up to a failing sample", [&] {
    loader.start_epoch(0);
    for (int step = 0; step < 3; ++step) BOOST_REQUIRE(loader.next().has_value());  // rows 0..11
    BOOST_CHECK_EXCEPTION(loader.next(), kiln::DataError,
                          message_has<kiln::DataError>("counting: sample 13 is corrupt (test)"));
    // The error is not skipped: asking again repeats it.
    BOOST_CHECK_EXCEPTION(loader.next(), kiln::DataError,
                          message_has<kiln::DataError>("sample 13 is corrupt"));
  });
}

BOOST_AUTO_TEST_CASE(next_before_start_epoch_and_after_the_end) {
  auto source = std::make_shared<CountingSource>(8);
  DataLoader loader(source, nullptr, loader_options(shard(0, 4, 0, 1, LastBatch::drop), 1, 1));
  BOOST_CHECK_EXCEPTION(loader.next(), kiln::Error,
                        message_has<kiln::Error>("called before start_epoch()"));
  loader.start_epoch(0);
  BOOST_CHECK(loader.next().has_value());
  BOOST_CHECK(loader.next().has_value());
  BOOST_CHECK(!loader.next().has_value());
  BOOST_CHECK(!loader.next().has_value());
}

BOOST_AUTO_TEST_CASE(start_epoch_abandons_an_unfinished_epoch) {
  auto source = std::make_shared<CountingSource>(300, -1, std::chrono::microseconds(200));
  const ShardOptions s = shard(0, 8, 0, 1, LastBatch::drop, 5);
  std::vector<Rows> fresh;
  {
    DataLoader reference(source, nullptr, loader_options(s, 2, 2));
    fresh = run_epoch(reference, 1);
  }
  within_deadline("abandoning an epoch", [&] {
    DataLoader loader(source, nullptr, loader_options(s, 3, 4));
    loader.start_epoch(0);
    BOOST_REQUIRE(loader.next().has_value());
    BOOST_REQUIRE(loader.next().has_value());
    BOOST_CHECK(run_epoch(loader, 1) == fresh);  // no stale batch of epoch 0 leaks in
  });
}

// A resume from a mid-epoch checkpoint starts the loader at a later step: it hands out exactly
// the steps the full epoch would have from there on, for any ring size, and refuses a step
// outside the epoch. global_rows(step) agrees with every batch.
BOOST_AUTO_TEST_CASE(start_epoch_at_a_later_step_continues_the_same_epoch) {
  auto source = std::make_shared<CountingSource>(97);
  for (LastBatch policy : {LastBatch::drop, LastBatch::partial}) {
    const ShardOptions s = shard(0, 5, 1, 2, policy, 11);
    DataLoader full(source, nullptr, loader_options(s, 2, 2));
    const std::vector<Rows> whole = run_epoch(full, 2);
    const kiln::data::Sharder sharder(shard(97, 5, 1, 2, policy, 11));
    for (std::size_t i = 0; i < whole.size(); ++i) {
      BOOST_TEST(whole[i].global_rows == sharder.global_rows(static_cast<std::int64_t>(i)));
    }
    for (const std::int64_t first : {std::int64_t{1}, std::int64_t{4}, static_cast<std::int64_t>(whole.size()) - 1}) {
      DataLoader later(source, nullptr, loader_options(s, 3, 1));
      later.start_epoch(2, first);
      std::vector<Rows> rest;
      while (auto b = later.next()) rest.push_back(copy_rows(*b));
      BOOST_TEST_REQUIRE(rest.size() == whole.size() - static_cast<std::size_t>(first));
      BOOST_CHECK(std::equal(rest.begin(), rest.end(), whole.begin() + first));
    }
    DataLoader bad(source, nullptr, loader_options(s, 1, 1));
    BOOST_CHECK_THROW(bad.start_epoch(0, -1), kiln::Error);
    BOOST_CHECK_THROW(bad.start_epoch(0, static_cast<std::int64_t>(whole.size()) + 1), kiln::Error);
  }
}

BOOST_AUTO_TEST_CASE(destructor_mid_epoch_does_not_hang) {
  auto source = std::make_shared<CountingSource>(10000, -1, std::chrono::microseconds(100));
  within_deadline("destroying a loader mid-epoch", [&] {
    for (int workers : {1, 4}) {
      DataLoader loader(source, nullptr, loader_options(shard(0, 16, 0, 1, LastBatch::drop), workers, 4));
      loader.start_epoch(0);
      BOOST_REQUIRE(loader.next().has_value());
    }  // destroyed with workers busy and the ring full
    DataLoader never_started(source, nullptr, loader_options(shard(0, 16, 0, 1, LastBatch::drop), 2, 2));
  });
  // Bounded work: the ring stops decoding (prefetch + 1 batches ahead at most per loader).
  BOOST_CHECK_LE(source->reads(), 2 * 5 * 16 + 16);
}

// An upload event the test opens by hand: synchronize() blocks until open() (or throws).
class GateEvent final : public kiln::Event {
 public:
  void synchronize() override {
    std::unique_lock lock(mu_);
    waiters_.fetch_add(1);
    cv_.wait(lock, [this] { return open_; });
    if (fail_) throw kiln::BackendError("gate: the upload failed (test)");
  }
  void open(bool fail = false) {
    {
      std::lock_guard lock(mu_);
      open_ = true;
      fail_ = fail;
    }
    cv_.notify_all();
  }
  int waiters() const { return waiters_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  bool fail_ = false;
  std::atomic<int> waiters_{0};
};

BOOST_AUTO_TEST_CASE(a_slot_is_not_refilled_before_its_upload_event_completes) {
  // prefetch 1: two slots, so step 2 goes into step 0's slot. Step 0 is tied to a closed gate
  // (its upload "still queued"): no worker may decode step 2 until the gate opens.
  auto source = std::make_shared<CountingSource>(40);
  const ShardOptions s = shard(0, 4, 0, 1, LastBatch::drop, 3, Shuffle::no);
  std::vector<Rows> want;
  {
    DataLoader reference(source, nullptr, loader_options(s, 2, 1));
    want = run_epoch(reference, 0);
  }
  within_deadline("waiting for an upload event", [&] {
    auto local = std::make_shared<CountingSource>(40);
    DataLoader loader(local, nullptr, loader_options(s, 2, 1));
    loader.start_epoch(0);
    auto b0 = loader.next();
    BOOST_REQUIRE(b0.has_value());
    const Rows step0 = copy_rows(*b0);
    auto gate = std::make_shared<GateEvent>();
    loader.release_after(gate);
    auto b1 = loader.next();  // releases step 0's slot to the workers...
    BOOST_REQUIRE(b1.has_value());
    for (int i = 0; i < 200 && gate->waiters() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_CHECK_EQUAL(gate->waiters(), 1);       // ...and a worker waits for the gate,
    BOOST_CHECK_EQUAL(local->reads(), 2 * 4);    // having decoded nothing of step 2
    BOOST_CHECK(copy_rows(*b0) == step0);        // the slot still holds step 0, untouched
    gate->open();
    std::vector<Rows> got{step0, copy_rows(*b1)};
    while (auto b = loader.next()) got.push_back(copy_rows(*b));
    BOOST_CHECK(got == want);
  });
}

BOOST_AUTO_TEST_CASE(a_failed_upload_event_is_rethrown_by_next) {
  auto source = std::make_shared<CountingSource>(40);
  within_deadline("a failing upload event", [&] {
    DataLoader loader(source, nullptr, loader_options(shard(0, 4, 0, 1, LastBatch::drop, 3), 1, 1));
    loader.start_epoch(0);
    BOOST_REQUIRE(loader.next().has_value());
    auto gate = std::make_shared<GateEvent>();
    gate->open(/*fail=*/true);
    loader.release_after(gate);
    // The worker refilling step 0's slot (for step 2) meets the failing event. Whether step 1 was
    // handed out before that is a race; the next() after it (step 1's or, at the latest, step 2's,
    // which needs that slot) is refused with the event's error.
    bool refused = false;
    for (int step = 1; step <= 2 && !refused; ++step) {
      try {
        BOOST_REQUIRE(loader.next().has_value());
      } catch (const kiln::BackendError& e) {
        BOOST_TEST(std::string(e.what()).find("gate: the upload failed (test)") != std::string::npos, e.what());
        refused = true;
      }
    }
    BOOST_TEST(refused, "no next() rethrew the failed upload");
    loader.release_after(nullptr);  // no constraint: accepted
    loader.start_epoch(1);          // a new epoch starts clean
    BOOST_CHECK(loader.next().has_value());
  });
}

BOOST_AUTO_TEST_CASE(loader_rejects_bad_options) {
  auto source = std::make_shared<CountingSource>(8);
  BOOST_CHECK_EXCEPTION(DataLoader(source, nullptr, loader_options(shard(0, 2, 0, 1, LastBatch::drop), 0, 2)),
                        kiln::ConfigError,
                        message_has<kiln::ConfigError>("loader.workers = 0; it must be at least 1"));
  BOOST_CHECK_EXCEPTION(DataLoader(source, nullptr, loader_options(shard(0, 2, 0, 1, LastBatch::drop), 1, 0)),
                        kiln::ConfigError,
                        message_has<kiln::ConfigError>("loader.prefetch = 0; it must be at least 1"));
  BOOST_CHECK_EXCEPTION(DataLoader(nullptr, nullptr, loader_options(shard(0, 2, 0, 1, LastBatch::drop), 1, 1)),
                        kiln::Error, message_has<kiln::Error>("needs a data source"));
}
