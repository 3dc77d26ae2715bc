// The `bf16` precision policy: f32 master weights, bf16 compute copies, no loss scaling (bf16
// has f32's exponent range, so gradients neither underflow nor overflow where f32 would not).
// check_backend insists on native bf16 arithmetic: on a host (CPU) backend the device must
// report avx512_bf16 or AMX in DeviceInfo, because oneDNN would otherwise emulate bf16 more
// slowly than f32 -- a silent slowdown the user did not ask for (allow_emulated = true accepts
// it). Casts and the optional finite check are one Backend op per arena (param_runs.hpp,
// finite_check.hpp).
#include <fmt/format.h>

#include <kiln/sdk/plugin.hpp>

#include "kiln/sdk/finite_check.hpp"
#include "kiln/sdk/param_runs.hpp"

namespace kiln::bf16 {
namespace {

/// Whether a host backend's device description names a CPU feature with bf16 arithmetic.
bool cpu_has_native_bf16(const DeviceInfo& d) {
  for (const std::string* text : {&d.name, &d.detail}) {
    if (text->find("avx512_bf16") != std::string::npos || text->find("avx512_core_bf16") != std::string::npos ||
        text->find("amx") != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

class Bf16Policy final : public PrecisionPolicy {
 public:
  explicit Bf16Policy(const PluginArgs& args)
      : check_finite_(args.params->get_bool("check_finite")),
        allow_emulated_(args.params->get_bool("allow_emulated")) {}

  std::string_view name() const override { return "bf16"; }
  DType param_dtype() const override { return DType::f32; }
  DType compute_dtype() const override { return DType::bf16; }

  void check_backend(const Backend& backend) const override {
    if (!backend.supports(Op::cast, DType::bf16)) {
      throw UnsupportedError(fmt::format(
          "backend '{}' cannot run the bf16 policy: cast bf16 is not supported (needed for the bf16 "
          "weight copies); use precision.type = \"fp32\"",
          backend.name()));
    }
    if (!backend.supports(Op::matmul, DType::bf16)) {
      throw UnsupportedError(fmt::format(
          "backend '{}' cannot compute in bf16: matmul bf16 is not supported; use precision.type = \"fp32\"",
          backend.name()));
    }
    const DeviceInfo device = backend.device();
    if (device.memory != MemoryKind::device && !allow_emulated_ && !cpu_has_native_bf16(device)) {
      throw UnsupportedError(fmt::format(
          "backend '{}' runs on '{}' ({}), which has no native bf16 arithmetic (avx512_bf16 or AMX); "
          "bf16 would be emulated and slower than f32. Use precision.type = \"fp32\", or set "
          "precision.allow_emulated = true to accept the emulation",
          backend.name(), device.name, device.detail));
    }
    if (check_finite_ && !backend.supports(Op::check_finite, DType::f32)) {
      throw UnsupportedError(fmt::format("precision.check_finite needs check_finite f32 on backend '{}'",
                                         backend.name()));
    }
  }

  void before_forward(Backend& backend, std::span<const Parameter> params) override {
    runs_.refresh(params);
    for (const sdk::CastRun& run : runs_.casts()) backend.cast(run.compute, run.value);
  }

  float loss_scale() const override { return 1.0f; }

  StepDecision after_allreduce(Backend& backend, std::span<const Parameter> params) override {
    if (!check_finite_ || params.empty()) return StepDecision::apply;
    runs_.refresh(params);
    if (!finite_.all_finite(backend, runs_.grads())) finite_.throw_nonfinite(backend, params);
    return StepDecision::apply;
  }

  std::map<std::string, double> metrics() const override { return {}; }
  std::map<std::string, double> state() const override { return {}; }
  // Nothing to restore. A checkpoint of an fp16 run (loss-scale state) may be resumed in bf16:
  // the scale has no meaning without f16's narrow range, so it is dropped.
  void load_state(const std::map<std::string, double>&) override {}

 private:
  bool check_finite_;
  bool allow_emulated_;
  sdk::ParamRuns runs_;  // one cast and one check_finite per arena, not per parameter
  sdk::FiniteCheck finite_;
};

constexpr kiln_param_spec_v1 kBf16Params[] = {
    {"check_finite", KILN_PARAM_BOOL, "false", nullptr,
     "Stop with an error naming the parameter when a reduced gradient has inf/NaN."},
    {"allow_emulated", KILN_PARAM_BOOL, "false", nullptr,
     "Accept a CPU without native bf16 (avx512_bf16/AMX), where bf16 is emulated and slower than f32."},
};

}  // namespace kiln::bf16

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::PrecisionPolicy, kiln::bf16::Bf16Policy>(
    "bf16", "0.1.0", "f32 master weights, bf16 compute on native bf16 hardware, no loss scaling",
    kiln::bf16::kBf16Params));
