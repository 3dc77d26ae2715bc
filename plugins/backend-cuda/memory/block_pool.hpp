// BlockPool: the caching policy of the device (and pinned host) allocator over any raw memory
// source, so CI tests it with a fake device. Not thread-safe; DeviceAllocator locks around it.
//
// Free blocks are kept per stream and size class, ordered by (stream, size, address); a request
// takes the smallest cached block of its stream that fits (best fit) and splits off the rest
// (bin_policy.hpp). Freed blocks merge with free neighbours of the same segment. Only when no
// block fits does the pool ask the raw source for a new segment; if that fails it returns every
// wholly free segment to the source and retries once, then reports out-of-memory. Blocks are
// reused only on the stream they were allocated for, so a reuse is ordered after the last use
// without events (work of another stream on a block must be ordered by the caller).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <unordered_map>

#include "memory/allocation_label.hpp"
#include "memory/bin_policy.hpp"

namespace kiln::cuda {

/// Where segments come from (cudaMalloc, cudaHostAlloc, or a test's fake).
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  /// A new segment of `bytes`, or nullptr when the source is out of memory (other failures throw).
  virtual void* allocate(std::size_t bytes) = 0;
  /// Gives a segment from allocate() back. Must not throw.
  virtual void release(void* ptr, std::size_t bytes) noexcept = 0;
  /// Throws the out-of-memory error for a request of `asked` bytes (after the retry failed).
  [[noreturn]] virtual void out_of_memory(const AllocationLabel& what, std::size_t asked) = 0;
};

/// Counters of one pool (bytes unless named otherwise).
struct PoolStats {
  std::size_t allocated = 0;       ///< in blocks handed out (rounded sizes)
  std::size_t reserved = 0;        ///< in segments obtained from the raw source
  std::size_t peak_allocated = 0;
  std::size_t peak_reserved = 0;
  std::uint64_t requests = 0;      ///< allocate() calls
  std::uint64_t raw_allocs = 0;    ///< successful RawMemory::allocate calls (cudaMalloc count)
  std::uint64_t raw_frees = 0;     ///< RawMemory::release calls
  std::uint64_t oom_retries = 0;   ///< times the cache was emptied after a failed raw allocation
  /// Bytes cached: reserved but not handed out.
  std::size_t cached() const noexcept { return reserved - allocated; }
};

class BlockPool {
 public:
  /// Streams are opaque keys (a cudaStream_t cast to an integer; 0 for host memory).
  using StreamKey = std::uintptr_t;

  /// `reserve_limit` > 0: before a new segment would take the reserved total above it, wholly
  /// free segments are given back first (a soft cap; 0 = cache without limit).
  explicit BlockPool(RawMemory& raw, std::size_t reserve_limit = 0);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  /// A block of at least `bytes` for work on `stream`. `what` names the request in the
  /// out-of-memory error ("allocate f16(256, 64, 56, 56)"); it is formatted only then.
  void* allocate(std::size_t bytes, StreamKey stream, const AllocationLabel& what);
  /// Returns a block to the cache. False if `ptr` is not an allocated block of this pool.
  bool free(void* ptr) noexcept;
  /// Gives every wholly free segment back to the raw source; returns the bytes given back.
  std::size_t release_cached() noexcept;

  const PoolStats& stats() const noexcept { return stats_; }
  /// Number of free blocks cached (for tests and the README's description of reuse).
  std::size_t cached_blocks() const noexcept { return free_[0].size() + free_[1].size(); }

 private:
  struct Block {
    char* ptr = nullptr;
    std::size_t size = 0;
    StreamKey stream = 0;
    SizeClass size_class = SizeClass::small;
    bool in_use = false;
    Block* prev = nullptr;  // neighbours inside the same segment
    Block* next = nullptr;
  };
  struct ByStreamSizeAddress {
    bool operator()(const Block* a, const Block* b) const noexcept;
  };
  using FreeSet = std::set<Block*, ByStreamSizeAddress>;

  FreeSet& free_set(SizeClass c) noexcept { return free_[static_cast<int>(c)]; }
  Block* find_cached(std::size_t rounded, StreamKey stream);
  Block* new_segment(std::size_t rounded, StreamKey stream, std::size_t asked, const AllocationLabel& what);
  void split(Block* block, std::size_t rounded);
  void note_peaks() noexcept;

  RawMemory& raw_;
  std::size_t reserve_limit_;
  FreeSet free_[2];
  std::unordered_map<void*, Block*> active_;
  PoolStats stats_;
};

}  // namespace kiln::cuda
