// The `fp32` precision policy: masters and compute in f32, no loss scaling. With
// check_finite = true a non-finite reduced gradient stops the run with the parameter's name
// instead of silently poisoning the weights.
#include <fmt/format.h>

#include <kiln/sdk/plugin.hpp>

#include "kiln/sdk/finite_check.hpp"
#include "kiln/sdk/param_runs.hpp"

namespace kiln::fp32 {

class Fp32Policy final : public PrecisionPolicy {
 public:
  explicit Fp32Policy(const PluginArgs& args) : check_finite_(args.params->get_bool("check_finite")) {}

  std::string_view name() const override { return "fp32"; }
  DType param_dtype() const override { return DType::f32; }
  DType compute_dtype() const override { return DType::f32; }
  void check_backend(const Backend& backend) const override {
    if (check_finite_ && !backend.supports(Op::check_finite, DType::f32)) {
      throw UnsupportedError(fmt::format("precision.check_finite needs check_finite on backend '{}'",
                                         backend.name()));
    }
  }
  void before_forward(Backend&, std::span<const Parameter>) override {}
  float loss_scale() const override { return 1.0f; }

  StepDecision after_allreduce(Backend& backend, std::span<const Parameter> params) override {
    if (!check_finite_ || params.empty()) return StepDecision::apply;
    runs_.refresh(params);
    if (!finite_.all_finite(backend, runs_.grads())) finite_.throw_nonfinite(backend, params);
    return StepDecision::apply;
  }

  std::map<std::string, double> metrics() const override { return {}; }
  std::map<std::string, double> state() const override { return {}; }
  void load_state(const std::map<std::string, double>&) override {}

 private:
  bool check_finite_;
  sdk::ParamRuns runs_;  // one check_finite per gradient arena, not per parameter
  sdk::FiniteCheck finite_;
};

constexpr kiln_param_spec_v1 kFp32Params[] = {
    {"check_finite", KILN_PARAM_BOOL, "false", nullptr,
     "Stop with an error naming the parameter when a reduced gradient has inf/NaN."},
};

}  // namespace kiln::fp32

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::PrecisionPolicy, kiln::fp32::Fp32Policy>(
    "fp32", "0.1.0", "f32 weights and compute, no loss scaling", kiln::fp32::kFp32Params));
