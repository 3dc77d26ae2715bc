// DeviceAllocator: cudaMalloc / cudaHostAlloc sources for BlockPool, the shared state that
// outlives the backend while tensors do, and deferred reuse of pinned blocks (events).
#include "memory/device_allocator.hpp"

#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cuda_check.hpp"
#include "device/device_select.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"

namespace kiln::cuda {
namespace {

class CudaDeviceMemory final : public RawMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(device) {}
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    check_cuda(e, fmt::format("cudaMalloc({} bytes) on device {}", bytes, device_));
    return p;
  }
  void release(void* ptr, std::size_t) noexcept override { cudaFree(ptr); }
  [[noreturn]] void out_of_memory(const AllocationLabel& what, std::size_t asked) override {
    throw_out_of_memory(what.str(), asked, device_);
  }

 private:
  int device_;
};

class PinnedHostMemory final : public RawMemory {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    // Portable: pinned for every device's context, so any rank's thread may copy from it.
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    check_cuda(e, fmt::format("cudaHostAlloc({} bytes)", bytes));
    return p;
  }
  void release(void* ptr, std::size_t) noexcept override { cudaFreeHost(ptr); }
  [[noreturn]] void out_of_memory(const AllocationLabel& what, std::size_t asked) override {
    throw BackendError(fmt::format(
        "{}: out of pinned host memory asking for {:.1f} MiB; lower loader.prefetch or the per-rank "
        "batch (data.batch_size)",
        what.str(), static_cast<double>(asked) / (1024.0 * 1024.0)));
  }
};

}  // namespace

struct DeviceAllocator::State {
  State(int dev, cudaStream_t stream, std::size_t limit)
      : device(dev), compute(stream), device_raw(dev), device_pool(device_raw, limit), pinned_pool(pinned_raw) {}
  ~State() {
    // Every tensor is gone; pinned blocks waiting for their event can be given back now.
    for (auto& [ptr, event] : pending_pinned) {
      cudaEventDestroy(event);
      pinned_pool.free(ptr);
    }
  }

  /// Frees the pinned blocks whose compute-stream work has finished. Caller holds `mutex`.
  void reclaim_pinned() {
    std::size_t kept = 0;
    for (auto& entry : pending_pinned) {
      const cudaError_t e = cudaEventQuery(entry.second);
      if (e == cudaErrorNotReady) {
        pending_pinned[kept++] = entry;
        continue;
      }
      cudaGetLastError();
      cudaEventDestroy(entry.second);
      pinned_pool.free(entry.first);
    }
    pending_pinned.resize(kept);
  }

  void release_device(void* ptr) noexcept {
    std::lock_guard<std::mutex> lock(mutex);
    if (!device_pool.free(ptr)) {
      log::get("cuda")->error("allocator: device block {} was not allocated here (double free?)", ptr);
    }
  }

  void release_pinned(void* ptr) noexcept {
    std::lock_guard<std::mutex> lock(mutex);
    cudaEvent_t event = nullptr;
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != device) cudaSetDevice(device);  // the event's device
    if (backend_alive && cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess &&
        cudaEventRecord(event, compute) == cudaSuccess) {
      pending_pinned.emplace_back(ptr, event);
      return;
    }
    cudaGetLastError();
    if (event != nullptr) cudaEventDestroy(event);
    pinned_pool.free(ptr);  // no stream left to wait for
  }

  int device;
  cudaStream_t compute;
  bool backend_alive = true;
  mutable std::mutex mutex;
  CudaDeviceMemory device_raw;
  PinnedHostMemory pinned_raw;
  BlockPool device_pool;
  BlockPool pinned_pool;
  std::vector<std::pair<void*, cudaEvent_t>> pending_pinned;
};

DeviceAllocator::DeviceAllocator(int device, cudaStream_t compute, std::size_t cache_limit_bytes)
    : state_(std::make_shared<State>(device, compute, cache_limit_bytes)) {}

DeviceAllocator::~DeviceAllocator() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  cudaStreamSynchronize(state_->compute);
  cudaGetLastError();
  state_->backend_alive = false;
  state_->reclaim_pinned();
  state_->device_pool.release_cached();
  state_->pinned_pool.release_cached();
}

std::shared_ptr<Storage> DeviceAllocator::device(std::size_t bytes, cudaStream_t stream,
                                                 const AllocationLabel& what) {
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    make_current(state_->device);
    ptr = state_->device_pool.allocate(bytes, reinterpret_cast<BlockPool::StreamKey>(stream), what);
  }
  return std::make_shared<Storage>(ptr, bytes, MemoryKind::device,
                                   [state = state_](void* p) { state->release_device(p); });
}

std::shared_ptr<Storage> DeviceAllocator::pinned(std::size_t bytes, const AllocationLabel& what) {
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    make_current(state_->device);
    state_->reclaim_pinned();
    ptr = state_->pinned_pool.allocate(bytes, 0, what);
  }
  return std::make_shared<Storage>(ptr, bytes, MemoryKind::host_pinned,
                                   [state = state_](void* p) { state->release_pinned(p); });
}

AllocatorStats DeviceAllocator::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return {state_->device_pool.stats(), state_->pinned_pool.stats()};
}

void DeviceAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->reclaim_pinned();
  state_->device_pool.release_cached();
  state_->pinned_pool.release_cached();
}

}  // namespace kiln::cuda
