// PrecisionPolicy: how numbers are stored and computed (plugins `fp32`, `bf16`, `fp16`).
//
// The trainer calls the hooks in this order every step:
//   before_forward (cast master weights to compute copies) -> forward -> loss ->
//   loss_scale() multiplies the loss gradient -> backward -> all-reduce ->
//   after_allreduce (unscale, check finite on the *reduced* gradients, so every rank reaches the
//   same decision) -> optimizer step only if the decision is StepDecision::apply.
// State (loss scale, counters) is saved into checkpoints through state()/load_state().
// Not thread-safe: the trainer thread calls everything. Errors: NumericError when the loss scale
// falls below its floor.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "kiln/tensor.hpp"

namespace kiln {

class Backend;
struct Parameter;

enum class StepDecision : std::uint8_t { apply = 0, skip = 1 };

class PrecisionPolicy {
 public:
  virtual ~PrecisionPolicy();

  virtual std::string_view name() const = 0;
  /// Master weight dtype (f32 for every shipped policy).
  virtual DType param_dtype() const = 0;
  /// Activation / matmul dtype.
  virtual DType compute_dtype() const = 0;
  /// Throws UnsupportedError if the backend cannot run this policy (e.g. no native bf16).
  virtual void check_backend(const Backend& backend) const = 0;

  /// Refreshes every parameter's `compute` copy from its master `value` (no-op when equal).
  virtual void before_forward(Backend& backend, std::span<const Parameter> params) = 0;
  /// Factor the trainer multiplies the loss gradient by (1 for fp32/bf16).
  virtual float loss_scale() const = 0;
  /// Called on the reduced gradients: unscales them, checks they are finite, updates the scale.
  /// A step whose gradients are not finite is skipped (StepDecision::skip) or stops the run
  /// (NumericError). A policy whose loss_scale() is 1 may make that check optional (fp32 and bf16:
  /// check_finite) and apply such a step: the trainer then stops at its next loss check and never
  /// checkpoints weights that are not finite ([run] stop_on_nonfinite_loss, kiln/train/loss_guard.hpp).
  virtual StepDecision after_allreduce(Backend& backend, std::span<const Parameter> params) = 0;

  /// Scalars for metrics.jsonl and the progress line ("loss_scale", "skipped_steps").
  virtual std::map<std::string, double> metrics() const = 0;
  /// Serialisable state for checkpoints, and its inverse.
  virtual std::map<std::string, double> state() const = 0;
  virtual void load_state(const std::map<std::string, double>& state) = 0;
};

}  // namespace kiln
