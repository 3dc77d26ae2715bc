// Minimal Backend implementations for the NCCL tests: HostOnlyBackend (no CUDA stream, like the
// cpu plugin) for the refusal paths that run in CI, and CudaTestBackend (cudaMalloc, one CUDA
// stream) so the gpu test needs no cuda backend plugin. Only what a communicator touches.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include <kiln/backend.hpp>
#include <kiln/errors.hpp>

namespace kiln_test {

class NoopEvent final : public kiln::Event {
 public:
  void synchronize() override {}
};

/// Everything but memory and streams; subclasses decide where memory lives.
class TestBackendBase : public kiln::Backend {
 public:
  bool supports(kiln::Op, kiln::DType) const override { return false; }
  kiln::Tensor to_device(const kiln::Tensor& host) override { return host; }
  std::shared_ptr<kiln::Event> record_event(kiln::StreamKind) override { return std::make_shared<NoopEvent>(); }
  void wait_event(kiln::StreamKind, const kiln::Event&) override {}
};

/// A host backend: native_stream() is nullptr, as on the cpu plugin.
class HostOnlyBackend final : public TestBackendBase {
 public:
  std::string_view name() const override { return "host-test"; }
  kiln::DeviceInfo device() const override { return {"test CPU", kiln::MemoryKind::host, 0, 0, 1, ""}; }
  kiln::Tensor allocate(const kiln::Shape& shape, kiln::DType dtype, kiln::MemoryKind) override {
    return kiln::host_tensor(shape, dtype);
  }
  void copy(const kiln::Tensor& src, const kiln::Tensor& dst) override { std::memcpy(dst.data(), src.data(), src.bytes()); }
  void fill(const kiln::Tensor&, double) override {}
  void synchronize() override {}
  void* native_stream(kiln::StreamKind) override { return nullptr; }
};

/// Claims to have a CUDA stream (a dummy handle) without touching CUDA: lets CI reach the
/// device checks in connect(), which come before the stream is ever used.
class FakeStreamBackend final : public TestBackendBase {
 public:
  explicit FakeStreamBackend(int device_index = 0) : device_index_(device_index) {}
  std::string_view name() const override { return "fake-cuda"; }
  kiln::DeviceInfo device() const override { return {"fake GPU", kiln::MemoryKind::device, device_index_, 0, 1, ""}; }
  kiln::Tensor allocate(const kiln::Shape& shape, kiln::DType dtype, kiln::MemoryKind) override {
    return kiln::host_tensor(shape, dtype);
  }
  void copy(const kiln::Tensor&, const kiln::Tensor&) override {}
  void fill(const kiln::Tensor&, double) override {}
  void synchronize() override {}
  void* native_stream(kiln::StreamKind) override { return &dummy_; }

 private:
  int device_index_ = 0;
  int dummy_ = 0;
};

}  // namespace kiln_test
