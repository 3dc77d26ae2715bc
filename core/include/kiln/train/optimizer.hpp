// Optimizers (SGD with momentum/nesterov/weight decay, Adam, AdamW) over flat parameter arenas.
//
// On the first step the optimizer groups the model's parameters into segments: runs of
// parameters adjacent in one arena with the same weight-decay treatment (kParamNoWeightDecay).
// Each step is then one fused Backend update per segment, not one per tensor. State buffers
// (momentum, Adam's m and v) mirror the parameter arena's layout, so a segment of state is the
// same slice as its segment of parameters. The gaps between parameters are zero and stay zero.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::train {

/// The [optimizer] types: "sgd", "adam", "adamw" (for Config::plugin_type's check).
std::span<const std::string_view> optimizer_types();
/// Keys of the [optimizer] table for `type` (one of optimizer_types(); `type` itself excluded).
/// Throws ConfigError for another type.
std::span<const kiln_param_spec_v1> optimizer_schema(const std::string& type);

class Optimizer {
 public:
  virtual ~Optimizer();
  /// Applies one update with learning rate `lr` to every parameter from its `grad`.
  virtual void step(Backend& backend, std::span<const Parameter> params, float lr) = 0;
  /// "adam(beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0)".
  virtual std::string describe() const = 0;
  /// Updates applied so far (restored from checkpoints with set_steps).
  std::int64_t steps() const noexcept { return steps_; }
  void set_steps(std::int64_t steps) noexcept { steps_ = steps; }
  /// Names of the per-parameter state tensors, PyTorch's: {"momentum_buffer"} for sgd with
  /// momentum, {"exp_avg", "exp_avg_sq"} for adam/adamw, {} for plain sgd.
  virtual std::vector<std::string> state_names() const = 0;
  /// Views of every parameter's state, named "<state name>.<parameter name>", in parameter order
  /// (allocating the state on first use). For checkpoints. Excluded parameters have none.
  std::vector<std::pair<std::string, Tensor>> state_views(Backend& backend, std::span<const Parameter> params);
  /// Parameters (by name) this optimizer never updates and keeps no state for: [model] freeze
  /// (freeze.hpp). Call before the first step or state_views; throws std::logic_error after.
  void exclude(std::set<std::string> names);

 protected:
  /// One contiguous run of parameters sharing weight decay, and its state slices.
  struct Segment {
    Tensor value, grad;
    Tensor state[2];
    float weight_decay = 0;
  };
  /// Builds segments on first use (never across an excluded parameter); allocates `num_states`
  /// state arenas shaped like the parameter storage, zero-filled.
  std::vector<Segment>& segments(Backend& backend, std::span<const Parameter> params, int num_states);
  std::int64_t steps_ = 0;
  float weight_decay_ = 0;

 private:
  bool excluded(const Parameter& p) const { return excluded_.count(p.name) > 0; }

  std::vector<Segment> segments_;
  std::set<std::string> excluded_;
  bool built_ = false;
};

/// Makes the optimizer `type` ("sgd" | "adam" | "adamw") from the validated [optimizer] table.
/// `table` must have been validated against optimizer_schema(type). Throws ConfigError for a bad
/// value (naming the key and where it was set).
std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const ParamMap& table);

}  // namespace kiln::train
