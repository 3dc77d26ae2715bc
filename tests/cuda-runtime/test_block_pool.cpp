// The caching allocator's policy without a GPU: size classes, best fit, splitting and merging,
// per-stream free lists, steady-state reuse (no new segments after the first step), the soft
// reserve limit, and the out-of-memory path (empty the cache, retry once, then report how much
// was asked and how much is free). The device is a fake RawMemory over malloc with a capacity.
#define BOOST_TEST_MODULE cuda_block_pool
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include <kiln/errors.hpp>

#include "memory/allocation_label.hpp"
#include "memory/bin_policy.hpp"
#include "memory/block_pool.hpp"
#include "memory/oom_message.hpp"

namespace {

using kiln::cuda::BlockPool;
constexpr std::size_t MiB = std::size_t{1} << 20;

/// A device of `capacity` bytes; segments are real host memory so addresses are genuine.
class FakeDevice final : public kiln::cuda::RawMemory {
 public:
  explicit FakeDevice(std::size_t capacity) : capacity_(capacity) {}
  void* allocate(std::size_t bytes) override {
    ++alloc_calls;
    if (used + bytes > capacity_) return nullptr;
    used += bytes;
    return std::malloc(bytes);
  }
  void release(void* ptr, std::size_t bytes) noexcept override {
    used -= bytes;
    std::free(ptr);
  }
  [[noreturn]] void out_of_memory(const kiln::cuda::AllocationLabel& what, std::size_t asked) override {
    ++labels_formatted;
    throw kiln::BackendError(kiln::cuda::format_out_of_memory(what.str(), asked, 0, capacity_ - used, capacity_));
  }
  std::size_t used = 0;
  int alloc_calls = 0;
  int labels_formatted = 0;  ///< the pool hands the label over only to report out-of-memory

 private:
  std::size_t capacity_;
};

constexpr BlockPool::StreamKey kStreamA = 0x1000;
constexpr BlockPool::StreamKey kStreamB = 0x2000;

char* as_bytes(void* p) { return static_cast<char*>(p); }

}  // namespace

BOOST_AUTO_TEST_CASE(requests_round_to_512_bytes_or_2_mib) {
  using namespace kiln::cuda;
  BOOST_TEST(round_request(0) == 512u);
  BOOST_TEST(round_request(1) == 512u);
  BOOST_TEST(round_request(512) == 512u);
  BOOST_TEST(round_request(513) == 1024u);
  BOOST_TEST(round_request(MiB) == MiB);
  BOOST_TEST(round_request(MiB + 1) == 2 * MiB);
  BOOST_TEST(round_request(3 * MiB) == 4 * MiB);
  BOOST_TEST(round_request(100 * MiB + 5) == 102 * MiB);
  BOOST_TEST((size_class(MiB) == SizeClass::small));
  BOOST_TEST((size_class(2 * MiB) == SizeClass::large));
  BOOST_TEST(segment_bytes(512) == 2 * MiB);
  BOOST_TEST(segment_bytes(MiB) == 2 * MiB);
  BOOST_TEST(segment_bytes(6 * MiB) == 6 * MiB);
}

BOOST_AUTO_TEST_CASE(blocks_split_only_when_a_whole_unit_remains) {
  using namespace kiln::cuda;
  BOOST_TEST(should_split(2 * MiB, 512));
  BOOST_TEST(should_split(1024, 512));
  BOOST_TEST(!should_split(512, 512));
  BOOST_TEST(should_split(4 * MiB, 2 * MiB));
  BOOST_TEST(!should_split(4 * MiB, 4 * MiB));
}

BOOST_AUTO_TEST_CASE(small_requests_share_one_segment) {
  FakeDevice device(64 * MiB);
  BlockPool pool(device);
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(pool.allocate(1000, kStreamA, "small"));
  BOOST_TEST(pool.stats().raw_allocs == 1u);
  BOOST_TEST(pool.stats().reserved == 2 * MiB);
  BOOST_TEST(pool.stats().allocated == 100 * 1024u);
  for (int i = 1; i < 100; ++i) BOOST_TEST(as_bytes(blocks[i]) - as_bytes(blocks[i - 1]) == 1024);
  for (void* p : blocks) BOOST_TEST(pool.free(p));
  BOOST_TEST(pool.stats().allocated == 0u);
  BOOST_TEST(pool.cached_blocks() == 1u);  // everything merged back into one free segment
}

BOOST_AUTO_TEST_CASE(the_steady_state_makes_no_new_allocations) {
  FakeDevice device(1024 * MiB);
  BlockPool pool(device);
  // One "training step": activations, workspaces and a loss scalar, freed in another order.
  const std::vector<std::size_t> sizes = {7, 4096, 300000, 3 * MiB + 17, 25 * MiB, 1000, 8 * MiB, 64};
  auto step = [&] {
    std::vector<void*> live;
    for (std::size_t s : sizes) live.push_back(pool.allocate(s, kStreamA, "step"));
    for (std::size_t i = 0; i < live.size(); i += 2) BOOST_TEST(pool.free(live[i]));
    for (std::size_t i = 1; i < live.size(); i += 2) BOOST_TEST(pool.free(live[i]));
  };
  step();
  const auto after_first = pool.stats();
  BOOST_TEST(after_first.raw_allocs > 0u);
  for (int i = 0; i < 9; ++i) step();
  const auto& s = pool.stats();
  BOOST_TEST(s.raw_allocs == after_first.raw_allocs);
  BOOST_TEST(s.raw_frees == 0u);
  BOOST_TEST(s.reserved == after_first.reserved);
  BOOST_TEST(s.peak_allocated == after_first.peak_allocated);
  BOOST_TEST(s.requests == 10 * sizes.size());
  BOOST_TEST(s.allocated == 0u);
  BOOST_TEST(s.cached() == s.reserved);
}

BOOST_AUTO_TEST_CASE(the_smallest_fitting_block_is_chosen_and_split) {
  FakeDevice device(64 * MiB);
  BlockPool pool(device);
  void* six = pool.allocate(6 * MiB, kStreamA, "six");
  void* four = pool.allocate(4 * MiB, kStreamA, "four");
  pool.free(six);
  pool.free(four);
  BOOST_TEST(pool.allocate(3 * MiB, kStreamA, "three") == four);  // rounds to 4 MiB: exact fit
  void* two = pool.allocate(2 * MiB, kStreamA, "two");              // best fit: the 6 MiB block
  BOOST_TEST(two == six);
  void* rest = pool.allocate(4 * MiB, kStreamA, "rest");            // its 4 MiB remainder
  BOOST_TEST(as_bytes(rest) == as_bytes(six) + 2 * MiB);
  BOOST_TEST(pool.stats().raw_allocs == 2u);
}

BOOST_AUTO_TEST_CASE(freed_neighbours_merge_and_whole_segments_go_back) {
  FakeDevice device(64 * MiB);
  BlockPool pool(device);
  void* a = pool.allocate(512, kStreamA, "a");
  void* b = pool.allocate(512, kStreamA, "b");
  void* c = pool.allocate(512, kStreamA, "c");
  BOOST_TEST(pool.free(b));
  BOOST_TEST(pool.release_cached() == 0u);  // the segment is still in use
  BOOST_TEST(pool.free(a));
  BOOST_TEST(pool.free(c));
  BOOST_TEST(pool.cached_blocks() == 1u);
  BOOST_TEST(pool.release_cached() == 2 * MiB);
  BOOST_TEST(pool.stats().raw_frees == 1u);
  BOOST_TEST(pool.stats().reserved == 0u);
  BOOST_TEST(device.used == 0u);
}

BOOST_AUTO_TEST_CASE(blocks_are_reused_only_on_their_stream) {
  FakeDevice device(64 * MiB);
  BlockPool pool(device);
  void* on_a = pool.allocate(4 * MiB, kStreamA, "a");
  pool.free(on_a);
  void* on_b = pool.allocate(4 * MiB, kStreamB, "b");
  BOOST_TEST(on_b != on_a);
  BOOST_TEST(pool.stats().raw_allocs == 2u);
  BOOST_TEST(pool.allocate(4 * MiB, kStreamA, "a again") == on_a);
  BOOST_TEST(pool.stats().raw_allocs == 2u);
}

BOOST_AUTO_TEST_CASE(a_failed_allocation_empties_the_cache_and_retries_once) {
  FakeDevice device(8 * MiB);
  BlockPool pool(device);
  pool.free(pool.allocate(4 * MiB, kStreamA, "x"));
  pool.free(pool.allocate(2 * MiB, kStreamB, "y"));  // another stream: not reusable for A
  BOOST_TEST(pool.stats().reserved == 6 * MiB);
  void* p = pool.allocate(6 * MiB, kStreamA, "big");  // 6 + 6 > 8: fails, frees 6, retries
  BOOST_TEST(p != nullptr);
  const auto& s = pool.stats();
  BOOST_TEST(s.oom_retries == 1u);
  BOOST_TEST(s.raw_frees == 2u);
  BOOST_TEST(s.reserved == 6 * MiB);
  BOOST_TEST(device.alloc_calls == 4);  // x, y, the failed try, the retry
}

BOOST_AUTO_TEST_CASE(out_of_memory_after_the_retry_reports_asked_and_free) {
  FakeDevice device(8 * MiB);
  BlockPool pool(device);
  void* held = pool.allocate(6 * MiB, kStreamA, "held");
  pool.free(pool.allocate(MiB / 2, kStreamA, "small"));  // a cached 2 MiB small segment
  BOOST_TEST(device.used == 8 * MiB);
  try {
    pool.allocate(4 * MiB, kStreamA, "backend 'cuda', allocate f32(1048576)");
    BOOST_FAIL("expected an out-of-memory BackendError");
  } catch (const kiln::BackendError& e) {
    BOOST_TEST(std::string(e.what()) ==
               "backend 'cuda', allocate f32(1048576): out of GPU memory asking for 4.0 MiB on device 0 "
               "(2.0 MiB free of 8.0 MiB); use a smaller per-rank batch (data.batch_size) or a lower precision");
  }
  BOOST_TEST(pool.stats().oom_retries == 1u);
  BOOST_TEST(pool.stats().raw_frees == 1u);  // the cached segment went back before the retry
  BOOST_TEST(pool.stats().allocated == 6 * MiB);
  BOOST_TEST(pool.free(held));
}

// A label owns nothing (trivially destructible and copyable: no heap memory, no string), so
// building one per allocation costs a few stores; the text exists only when str() is called.
static_assert(std::is_trivially_destructible_v<kiln::cuda::AllocationLabel>);
static_assert(std::is_trivially_copyable_v<kiln::cuda::AllocationLabel>);

BOOST_AUTO_TEST_CASE(labels_format_only_when_asked) {
  using kiln::cuda::AllocationLabel;
  const kiln::Shape shape{256, 64, 56, 56};
  const AllocationLabel tensor = AllocationLabel::tensor("backend 'cuda', allocate", kiln::DType::f16, shape);
  const AllocationLabel bytes = AllocationLabel::bytes("backend 'cuda', workspace", 4096);
  const AllocationLabel fixed = "staging";
  BOOST_TEST(tensor.str() == "backend 'cuda', allocate f16(256, 64, 56, 56)");
  BOOST_TEST(bytes.str() == "backend 'cuda', workspace of 4096 bytes");
  BOOST_TEST(fixed.str() == "staging");
  BOOST_TEST(AllocationLabel::text("barrier").str() == "barrier");
}

BOOST_AUTO_TEST_CASE(the_pool_formats_the_label_only_for_out_of_memory) {
  FakeDevice device(8 * MiB);
  BlockPool pool(device);
  const kiln::Shape shape{1024, 1024};
  const auto label = kiln::cuda::AllocationLabel::tensor("backend 'cuda', allocate", kiln::DType::f32, shape);
  void* a = pool.allocate(4 * MiB, kStreamA, label);       // a new segment
  pool.free(a);
  void* b = pool.allocate(4 * MiB, kStreamA, label);       // reuse of the cached block
  void* c = pool.allocate(4 * MiB, kStreamA, label);       // the device is now full
  BOOST_TEST(device.labels_formatted == 0);
  try {
    pool.allocate(4 * MiB, kStreamA, label);
    BOOST_FAIL("expected an out-of-memory BackendError");
  } catch (const kiln::BackendError& e) {
    BOOST_TEST(std::string(e.what()).starts_with("backend 'cuda', allocate f32(1024, 1024): out of GPU memory "
                                                 "asking for 4.0 MiB"));
  }
  BOOST_TEST(device.labels_formatted == 1);
  BOOST_TEST(pool.free(b));
  BOOST_TEST(pool.free(c));
}

BOOST_AUTO_TEST_CASE(the_reserve_limit_gives_cached_segments_back_first) {
  FakeDevice device(64 * MiB);
  BlockPool pool(device, 4 * MiB);
  pool.free(pool.allocate(2 * MiB, kStreamA, "a"));
  void* p = pool.allocate(4 * MiB, kStreamA, "b");  // 2 + 4 > limit 4: release the cached 2 first
  BOOST_TEST(p != nullptr);
  BOOST_TEST(pool.stats().raw_frees == 1u);
  BOOST_TEST(pool.stats().reserved == 4 * MiB);
  BOOST_TEST(pool.stats().oom_retries == 0u);
}

BOOST_AUTO_TEST_CASE(freeing_a_foreign_pointer_is_refused) {
  FakeDevice device(8 * MiB);
  BlockPool pool(device);
  int x = 0;
  BOOST_TEST(!pool.free(&x));
  void* p = pool.allocate(100, kStreamA, "p");
  BOOST_TEST(pool.free(p));
  BOOST_TEST(!pool.free(p));  // double free
}

BOOST_AUTO_TEST_CASE(the_pool_gives_everything_back_when_destroyed) {
  FakeDevice device(64 * MiB);
  {
    BlockPool pool(device);
    pool.allocate(3 * MiB, kStreamA, "live");
    pool.allocate(100, kStreamA, "live small");
    pool.free(pool.allocate(100, kStreamA, "cached small"));
    BOOST_TEST(device.used == 6 * MiB);
  }
  BOOST_TEST(device.used == 0u);
}
