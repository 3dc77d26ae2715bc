// Shared helpers of test_precision: the real `cpu` backend and the precision plugins made through
// the core registry (as a run makes them), a forwarding backend that can pretend to be another
// device and counts the policy's ops, and f32 arenas laid out by the core ParameterStore.
//
// The registry is process-wide and never destroyed, so plugin objects never outlive their code.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"
#include "kiln/precision_policy.hpp"
#include "nn_fixture.hpp"  // registry(), cpu(), read(), write(), error_text<E>()

namespace kiln::test {

/// A precision plugin `name` with the [precision] keys in `toml_body` (validated, defaults filled).
std::shared_ptr<PrecisionPolicy> make_policy(const std::string& name, const std::string& toml_body);

/// Delegates memory and the ops precision policies use to an inner backend; can report another
/// DeviceInfo, extra supported and withdrawn (op, dtype) pairs, and counts cast/check_finite/scale calls.
class ForwardingBackend final : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  std::optional<DeviceInfo> device_override;
  std::vector<std::pair<Op, DType>> extra_supported;
  std::vector<std::pair<Op, DType>> unsupported;  // reported as not supported
  int casts = 0, finite_checks = 0, scales = 0;

  std::string_view name() const override { return inner_.name(); }
  DeviceInfo device() const override { return device_override ? *device_override : inner_.device(); }
  bool supports(Op op, DType dtype) const override;
  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override {
    return inner_.allocate(shape, dtype, where);
  }
  void copy(const Tensor& src, const Tensor& dst) override { inner_.copy(src, dst); }
  void fill(const Tensor& t, double value) override { inner_.fill(t, value); }
  Tensor to_device(const Tensor& host) override { return inner_.to_device(host); }
  void synchronize() override { inner_.synchronize(); }
  std::shared_ptr<Event> record_event(StreamKind stream) override { return inner_.record_event(stream); }
  void wait_event(StreamKind stream, const Event& event) override { inner_.wait_event(stream, event); }
  void* native_stream(StreamKind stream) override { return inner_.native_stream(stream); }
  void cast(const Tensor& dst, const Tensor& src) override {
    ++casts;
    inner_.cast(dst, src);
  }
  void scale(const Tensor& t, float factor) override {
    ++scales;
    inner_.scale(t, factor);
  }
  void check_finite(const Tensor& flag, const Tensor& t) override {
    ++finite_checks;
    inner_.check_finite(flag, t);
  }

 private:
  Backend& inner_;
};

/// Parameters "a" (3, 5), "b" (7), "c" (2, 2) in one f32 master arena, one f32 gradient arena
/// and (for compute != f32) one compute arena, allocated on the cpu backend.
std::unique_ptr<nn::ParameterStore> make_store(DType compute_dtype);

/// x rounded to the nearest value with `bits` significant bits (ties to even): 11 for f16,
/// 8 for bf16. For normal-range inputs this is the f32 -> f16/bf16 conversion, computed in
/// double independently of the backend's bit tricks.
double round_to_bits(double x, int bits);

}  // namespace kiln::test
