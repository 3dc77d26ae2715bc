// DeviceAllocator: the CUDA side of the caching allocator. Device memory comes from cudaMalloc
// through a BlockPool (one free list per stream), pinned host memory (MemoryKind::host_pinned)
// from cudaHostAlloc through a second pool.
//
// Thread-safe (DataLoader workers allocate pinned staging buffers). Tensors may outlive the
// backend: their Storage keeps the shared pool state alive and frees into it. A pinned block is
// reused only after the compute-stream work enqueued before its release has finished (an event
// per released block), because a host-to-device copy from it may still be in flight.
#pragma once

#include <cstddef>
#include <memory>

#include <cuda_runtime_api.h>

#include "kiln/tensor.hpp"
#include "memory/block_pool.hpp"

namespace kiln::cuda {

/// What counters() and the tests read.
struct AllocatorStats {
  PoolStats device;
  PoolStats pinned;
};

class DeviceAllocator {
 public:
  /// `cache_limit_bytes` > 0 caps the device memory reserved before cached segments are given
  /// back (BlockPool's reserve_limit); 0 caches without limit.
  DeviceAllocator(int device, cudaStream_t compute, std::size_t cache_limit_bytes);
  /// Waits for the compute stream and gives cached memory back; blocks of live tensors are
  /// given back when their last tensor goes.
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  /// Device memory of `bytes` for work on `stream`; throws the out-of-memory BackendError
  /// (via throw_out_of_memory, naming `what`) when even an emptied cache does not help.
  /// `what` is formatted only on that failure path (allocation_label.hpp).
  std::shared_ptr<Storage> device(std::size_t bytes, cudaStream_t stream, const AllocationLabel& what);
  /// Pinned host memory of `bytes`.
  std::shared_ptr<Storage> pinned(std::size_t bytes, const AllocationLabel& what);

  AllocatorStats stats() const;
  /// Gives every wholly free cached segment back to CUDA (device and pinned).
  void empty_cache();

  struct State;  // shared with the Storage release functions

 private:
  std::shared_ptr<State> state_;
};

}  // namespace kiln::cuda
