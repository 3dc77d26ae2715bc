// AllocOnlyBackend: a Backend that only allocates (aligned host memory, whatever MemoryKind is
// asked for, which it counts), for DataLoader tests: the loader needs a backend for its staging
// buffers and nothing else. Copies and fills do nothing, to_device returns its argument, it
// supports no op.
//
// Header-only, for any test area: #include "../support/alloc_only_backend.hpp".
#pragma once

#include <atomic>
#include <cstdlib>
#include <memory>

#include "kiln/backend.hpp"

namespace kiln::test {

class AllocOnlyBackend final : public Backend {
 public:
  std::atomic<int> allocations{0};
  std::atomic<int> pinned{0};  ///< of those, MemoryKind::host_pinned

  std::string_view name() const override { return "alloc-only"; }
  DeviceInfo device() const override { return {}; }
  bool supports(Op, DType) const override { return false; }
  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override {
    ++allocations;
    if (where == MemoryKind::host_pinned) ++pinned;
    const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    auto storage = std::make_shared<Storage>(p, bytes, where, [](void* q) { std::free(q); });
    return Tensor(storage, shape, dtype);
  }
  void copy(const Tensor&, const Tensor&) override {}
  void fill(const Tensor&, double) override {}
  Tensor to_device(const Tensor& host) override { return host; }
  void synchronize() override {}
  std::shared_ptr<Event> record_event(StreamKind) override { return nullptr; }
  void wait_event(StreamKind, const Event&) override {}
  void* native_stream(StreamKind) override { return nullptr; }
};

}  // namespace kiln::test
