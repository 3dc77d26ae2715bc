// The finite check of reduced gradients, as the precision policies make it: one check_finite per
// tensor into one device flag, and one read of that flag (the step's one synchronisation), so a
// list of gradient runs (param_runs.hpp) costs the same whatever the number of parameters.
// Naming the culprit is the rare path, after a check failed: one read per parameter.
#pragma once

#include <span>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"

namespace kiln::sdk {

class FiniteCheck {
 public:
  /// Whether every element of every tensor of `tensors` is finite. Allocates the flag on the
  /// first call; needs check_finite for the tensors' dtype (f32 for gradients) on `backend`.
  bool all_finite(Backend& backend, std::span<const Tensor> tensors);
  /// For a policy that stops the run rather than skip the step, after all_finite() said no:
  /// throws NumericError naming the first parameter whose gradient holds inf or NaN.
  [[noreturn]] void throw_nonfinite(Backend& backend, std::span<const Parameter> params);

 private:
  Tensor flag_, flag_host_;
};

}  // namespace kiln::sdk
