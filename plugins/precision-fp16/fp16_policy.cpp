// The `fp16` precision policy: f32 master weights, f16 compute copies, dynamic loss scaling by
// the core LossScaler (2^16 to start, x2 after 2000 finite steps, x0.5 and a skipped step on
// inf/NaN, NumericError below the floor). The finite check runs on the *reduced* gradients (the
// trainer calls after_allreduce after GradSync), so every rank reaches the same decision. On a
// skipped step the gradients are left as they are (still scaled); the trainer zeroes them.
// Casts, checks and unscaling are one Backend op per contiguous arena (kiln/sdk/param_runs.hpp).
#include <fmt/format.h>

#include <kiln/sdk/plugin.hpp>

#include "kiln/sdk/finite_check.hpp"
#include "kiln/sdk/loss_scaler.hpp"
#include "kiln/sdk/param_runs.hpp"

namespace kiln::fp16 {

class Fp16Policy final : public PrecisionPolicy {
 public:
  explicit Fp16Policy(const PluginArgs& args) : scaler_(sdk::loss_scaler_options(*args.params)) {}

  std::string_view name() const override { return "fp16"; }
  DType param_dtype() const override { return DType::f32; }
  DType compute_dtype() const override { return DType::f16; }

  void check_backend(const Backend& backend) const override {
    // The policy's own ops: refresh f16 copies, check and unscale f32 gradients.
    const std::pair<Op, DType> own[] = {
        {Op::cast, DType::f16}, {Op::check_finite, DType::f32}, {Op::scale, DType::f32}};
    for (const auto& [op, dtype] : own) {
      if (!backend.supports(op, dtype)) {
        throw UnsupportedError(fmt::format(
            "backend '{}' cannot run the fp16 policy: {} {} is not supported (needed for the f16 "
            "weight copies and loss scaling); use precision.type = \"bf16\" or \"fp32\"",
            backend.name(), op_name(op), dtype_name(dtype)));
      }
    }
    // What every model's layers need in the compute dtype. A backend without f16 arithmetic may
    // still store f16 and compute in f32 internally; it says so by supporting the op for f16.
    if (!backend.supports(Op::matmul, DType::f16)) {
      throw UnsupportedError(fmt::format(
          "backend '{}' cannot compute in f16: matmul f16 is not supported; use precision.type = "
          "\"bf16\" or \"fp32\"",
          backend.name()));
    }
  }

  void before_forward(Backend& backend, std::span<const Parameter> params) override {
    runs_.refresh(params);
    for (const sdk::CastRun& run : runs_.casts()) backend.cast(run.compute, run.value);
  }

  float loss_scale() const override { return static_cast<float>(scaler_.scale()); }

  StepDecision after_allreduce(Backend& backend, std::span<const Parameter> params) override {
    runs_.refresh(params);
    const bool finite = finite_.all_finite(backend, runs_.grads());
    if (finite) {
      // The scale of this step (before update() may grow it); powers of two unscale exactly.
      const double scale = scaler_.scale();
      if (scale != 1.0) {
        for (const Tensor& g : runs_.grads()) backend.scale(g, static_cast<float>(1.0 / scale));
      }
    }
    return scaler_.update(finite ? sdk::GradStatus::finite : sdk::GradStatus::non_finite);
  }

  std::map<std::string, double> metrics() const override { return scaler_.metrics(); }
  std::map<std::string, double> state() const override { return scaler_.state(); }
  void load_state(const std::map<std::string, double>& state) override { scaler_.load_state(state); }

 private:
  sdk::LossScaler scaler_;
  sdk::ParamRuns runs_;  // one cast, check_finite and scale per arena, not per parameter
  sdk::FiniteCheck finite_;
};

constexpr kiln_param_spec_v1 kFp16Params[] = {
    {"initial_scale", KILN_PARAM_FLOAT, "65536.0", nullptr, "Loss scale at the first step (2^16).", "0", nullptr,
     KILN_PARAM_MIN_EXCLUSIVE},
    {"growth_interval", KILN_PARAM_INT, "2000", nullptr,
     "Consecutive finite steps after which the scale grows by growth_factor.", "1", nullptr},
    {"growth_factor", KILN_PARAM_FLOAT, "2.0", nullptr, "Multiplier applied after growth_interval finite steps.", "1",
     nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"backoff_factor", KILN_PARAM_FLOAT, "0.5", nullptr,
     "Multiplier applied when a step's reduced gradients contain inf/NaN; that step is skipped.", "0", "1",
     KILN_PARAM_MIN_EXCLUSIVE | KILN_PARAM_MAX_EXCLUSIVE},
    {"min_scale", KILN_PARAM_FLOAT, "1.0", nullptr,
     "Floor: a backoff below it stops the run with an error (the model diverged or the data has inf/NaN).", "0",
     nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"max_scale", KILN_PARAM_FLOAT, "16777216.0", nullptr, "Cap on the grown scale (2^24).", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"dynamic", KILN_PARAM_BOOL, "true", nullptr,
     "false: keep initial_scale fixed and stop with an error at the first inf/NaN gradient."},
};

}  // namespace kiln::fp16

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::PrecisionPolicy, kiln::fp16::Fp16Policy>(
    "fp16", "0.1.0", "f32 master weights, f16 compute, dynamic loss scaling", kiln::fp16::kFp16Params));
