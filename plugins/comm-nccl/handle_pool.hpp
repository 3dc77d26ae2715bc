// HandlePool: recycles handles that are costly to create (the CUDA events that mark when a
// collective has finished), so the hot path takes one from a free list instead of calling
// cudaEventCreate and cudaEventDestroy per collective (a ResNet-50 step issues one collective per
// gradient bucket, every step, for the whole run).
//
// acquire() hands out a Lease; the handle goes back to the free list when the Lease is destroyed
// (the Work that waited on it is gone). A Lease keeps the pool alive, so Work may outlive the
// communicator that issued it. At most `keep_idle` handles are kept free; beyond that a returned
// handle is destroyed, so a burst does not pin memory forever. When every lease is gone and the
// owner has dropped the pool, the idle handles are destroyed.
//
// Thread-safe: Work objects may be destroyed on threads other than the one that issued them.
// Plain C++ over two functions (create and destroy), so CI tests it with fake handles.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace kiln::nccl {

template <class Handle>
class HandlePool : public std::enable_shared_from_this<HandlePool<Handle>> {
 public:
  struct Ops {
    std::function<Handle()> create;              ///< throws on failure
    std::function<void(Handle)> destroy;         ///< must not throw
  };

  /// A handle on loan; returned to the pool on destruction. Move-only.
  class Lease {
   public:
    Lease() = default;
    Lease(std::shared_ptr<HandlePool> pool, Handle handle) : pool_(std::move(pool)), handle_(handle) {}
    Lease(Lease&& other) noexcept : pool_(std::move(other.pool_)), handle_(other.handle_) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        give_back();
        pool_ = std::move(other.pool_);
        handle_ = other.handle_;
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { give_back(); }

    Handle get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return pool_ != nullptr; }

   private:
    void give_back() noexcept {
      if (pool_) pool_->release(handle_);
      pool_.reset();
    }
    std::shared_ptr<HandlePool> pool_;
    Handle handle_{};
  };

  /// Pools live in a shared_ptr (leases hold one); create them with make().
  static std::shared_ptr<HandlePool> make(Ops ops, std::size_t keep_idle) {
    return std::shared_ptr<HandlePool>(new HandlePool(std::move(ops), keep_idle));
  }
  ~HandlePool() {
    for (Handle h : idle_) ops_.destroy(h);
  }
  HandlePool(const HandlePool&) = delete;
  HandlePool& operator=(const HandlePool&) = delete;

  /// A free handle, or a new one when none is free.
  Lease acquire() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        Handle h = idle_.back();
        idle_.pop_back();
        return Lease(this->shared_from_this(), h);
      }
    }
    Handle h = ops_.create();  // outside the lock: creation may be slow
    std::lock_guard<std::mutex> lock(mutex_);
    ++created_;
    return Lease(this->shared_from_this(), h);
  }

  /// Handles created so far (for tests and the README's claim of reuse).
  std::size_t created() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return created_;
  }
  /// Handles waiting in the free list.
  std::size_t idle() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_.size();
  }

 private:
  HandlePool(Ops ops, std::size_t keep_idle) : ops_(std::move(ops)), keep_idle_(keep_idle) {
    idle_.reserve(keep_idle_);
  }

  void release(Handle h) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_.size() < keep_idle_) {
        idle_.push_back(h);  // capacity reserved up front: push_back cannot throw here
        return;
      }
    }
    ops_.destroy(h);
  }

  Ops ops_;
  std::size_t keep_idle_;
  mutable std::mutex mutex_;
  std::vector<Handle> idle_;
  std::size_t created_ = 0;
};

}  // namespace kiln::nccl
