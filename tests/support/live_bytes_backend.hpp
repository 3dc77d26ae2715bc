// LiveBytesBackend: a ForwardingBackend that counts the bytes of device tensors allocated through
// it and still alive, and the most that were alive at once, as the cuda backend's caching
// allocator counts them (allocator_allocated_mib, allocator_peak_mib). On the cpu backend an
// allocated but never touched buffer costs no resident memory, so a model can waste device
// memory there without any RSS figure showing it; this wrapper makes such waste visible on a
// machine without a GPU.
//
// Each tensor it returns owns a Storage of its own over the inner tensor's bytes; that storage
// holds the inner one and takes its bytes off the count when the last view of it goes away.
// to_device() makes a counted device copy, as a GPU backend does.
//
// Header-only, for any test area: #include "../support/live_bytes_backend.hpp".
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>

#include "forwarding_backend.hpp"

namespace kiln::test {

class LiveBytesBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  /// Bytes of device tensors allocated here and not yet released.
  std::size_t live() const noexcept { return count_->live; }
  /// The most `live()` has been since construction.
  std::size_t peak() const noexcept { return count_->peak; }

  /// As a GPU backend does it: a device copy, counted (the cpu backend would hand the host
  /// tensor itself back, so a run's uploads would not count).
  Tensor to_device(const Tensor& host) override {
    Tensor t = allocate(host.shape(), host.dtype(), MemoryKind::device).with_layout(host.layout());
    copy(host, t);
    return t;
  }

  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override {
    Tensor t = inner().allocate(shape, dtype, where);
    if (where != MemoryKind::device) return t;
    std::shared_ptr<Storage> held = t.storage();
    const std::size_t bytes = held->bytes();
    count_->live += bytes;
    count_->peak = std::max(count_->peak, count_->live);
    auto counted = std::make_shared<Storage>(held->data(), bytes, held->kind(),
                                             [count = count_, held, bytes](void*) mutable {
                                               count->live -= bytes;
                                               held.reset();
                                             });
    return Tensor(counted, t.shape(), t.dtype(), t.offset_bytes(), t.layout());
  }

 private:
  struct Count {
    std::size_t live = 0;
    std::size_t peak = 0;
  };
  // Shared with every storage handed out, so a tensor may outlive the backend.
  std::shared_ptr<Count> count_ = std::make_shared<Count>();
};

}  // namespace kiln::test
