// HandlePool (plugins/comm-nccl/handle_pool.hpp), the free list the NCCL communicator takes its
// completion events from, with fake handles: a steady stream of collectives creates no new
// handles after the first, leases return their handle when dropped (also after the pool's owner
// is gone), the free list is capped, and concurrent returns lose nothing.
#define BOOST_TEST_MODULE nccl_handle_pool
#include <boost/test/unit_test.hpp>

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "handle_pool.hpp"

namespace {

using Pool = kiln::nccl::HandlePool<int>;

/// Fake handles: consecutive integers; records which are alive.
struct FakeHandles {
  int next = 1;
  std::set<int> alive;
  Pool::Ops ops() {
    return {[this] {
              alive.insert(next);
              return next++;
            },
            [this](int h) { alive.erase(h); }};
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_steady_stream_of_collectives_reuses_the_same_handles) {
  FakeHandles fake;
  auto pool = Pool::make(fake.ops(), 8);
  for (int step = 0; step < 100; ++step) {
    // Three buckets in flight at once, then all waited for and dropped (one training step).
    std::vector<Pool::Lease> in_flight;
    for (int bucket = 0; bucket < 3; ++bucket) in_flight.push_back(pool->acquire());
    std::set<int> distinct;
    for (const auto& lease : in_flight) distinct.insert(lease.get());
    BOOST_TEST(distinct.size() == 3u);  // never two collectives on one handle at once
  }
  BOOST_TEST(pool->created() == 3u);
  BOOST_TEST(pool->idle() == 3u);
  BOOST_TEST(fake.alive.size() == 3u);
}

BOOST_AUTO_TEST_CASE(the_free_list_is_capped_and_the_rest_destroyed) {
  FakeHandles fake;
  auto pool = Pool::make(fake.ops(), 2);
  {
    std::vector<Pool::Lease> burst;
    for (int i = 0; i < 5; ++i) burst.push_back(pool->acquire());
    BOOST_TEST(fake.alive.size() == 5u);
  }
  BOOST_TEST(pool->idle() == 2u);
  BOOST_TEST(fake.alive.size() == 2u);
}

BOOST_AUTO_TEST_CASE(leases_outlive_the_owner_and_the_last_one_destroys_everything) {
  FakeHandles fake;
  auto pool = Pool::make(fake.ops(), 4);
  Pool::Lease kept = pool->acquire();
  { Pool::Lease dropped = pool->acquire(); }
  pool.reset();  // the communicator is gone; a Work still holds `kept`
  BOOST_TEST(fake.alive.size() == 2u);
  BOOST_TEST(static_cast<bool>(kept));
  const int handle = kept.get();
  BOOST_TEST(fake.alive.count(handle) == 1u);
  kept = Pool::Lease();  // returned to a pool nobody else holds: the pool and its handles go
  BOOST_TEST(fake.alive.empty());
}

BOOST_AUTO_TEST_CASE(moved_leases_return_their_handle_once) {
  FakeHandles fake;
  auto pool = Pool::make(fake.ops(), 4);
  Pool::Lease a = pool->acquire();
  Pool::Lease b = std::move(a);
  BOOST_TEST(!static_cast<bool>(a));
  b = pool->acquire();  // the first handle goes back before b takes a second one
  BOOST_TEST(pool->idle() == 1u);
  BOOST_TEST(pool->created() == 2u);
}

BOOST_AUTO_TEST_CASE(concurrent_returns_lose_no_handle) {
  FakeHandles fake;
  auto pool = Pool::make(fake.ops(), 64);
  std::vector<Pool::Lease> leases;
  for (int i = 0; i < 64; ++i) leases.push_back(pool->acquire());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&leases, t] {
      for (int i = t; i < 64; i += 4) leases[static_cast<std::size_t>(i)] = Pool::Lease();
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(pool->idle() == 64u);
  BOOST_TEST(pool->created() == 64u);
}
