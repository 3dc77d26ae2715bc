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
#include "../support/forwarding_backend.hpp"

namespace kiln::test {

/// A precision plugin `name` with the [precision] keys in `toml_body` (validated, defaults filled).
std::shared_ptr<PrecisionPolicy> make_policy(const std::string& name, const std::string& toml_body);

/// The inner backend (through test::ForwardingBackend) that can report another DeviceInfo, extra
/// supported and withdrawn (op, dtype) pairs, and counts cast/check_finite/scale calls.
class PolicyWatchBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  std::optional<DeviceInfo> device_override;
  std::vector<std::pair<Op, DType>> extra_supported;
  std::vector<std::pair<Op, DType>> unsupported;  // reported as not supported
  int casts = 0, finite_checks = 0, scales = 0;

  DeviceInfo device() const override { return device_override ? *device_override : inner().device(); }
  bool supports(Op op, DType dtype) const override;
  void cast(const Tensor& dst, const Tensor& src) override {
    ++casts;
    ForwardingBackend::cast(dst, src);
  }
  void scale(const Tensor& t, float factor) override {
    ++scales;
    ForwardingBackend::scale(t, factor);
  }
  void check_finite(const Tensor& flag, const Tensor& t) override {
    ++finite_checks;
    ForwardingBackend::check_finite(flag, t);
  }
};

/// Parameters "a" (3, 5), "b" (7), "c" (2, 2) in one f32 master arena, one f32 gradient arena
/// and (for compute != f32) one compute arena, allocated on the cpu backend.
std::unique_ptr<nn::ParameterStore> make_store(DType compute_dtype);

/// x rounded to the nearest value with `bits` significant bits (ties to even): 11 for f16,
/// 8 for bf16. For normal-range inputs this is the f32 -> f16/bf16 conversion, computed in
/// double independently of the backend's bit tricks.
double round_to_bits(double x, int bits);

}  // namespace kiln::test
