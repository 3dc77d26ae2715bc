// GradClipper: gradient clipping by global L2 norm, as torch.nn.utils.clip_grad_norm_ does.
//
// The trainer calls clip() after GradSync has summed the gradients over ranks and after the
// precision policy has unscaled them (PrecisionPolicy::after_allreduce returned apply), so the
// norm is that of the true gradient of the global batch; a step the fp16 loss scaler skips is
// never clipped. Every rank holds the same reduced gradients and runs the same ops on them, so
// every rank computes the same norm and makes the same decision without another collective.
//
// The norm is computed on the device: for each gradient run (sdk::grad_runs, one 1-D view per
// contiguous arena) a 1 x n by n x 1 matmul adds the run's sum of squares into one f32 scalar,
// which is then read back to the host (a wait for the device's queue, once per optimizer step).
// The gaps between parameters in an arena are zero, so they add nothing. With the CUDA backend's
// allow_tf32 the matmul rounds its inputs to TF32, and the norm is then accurate to about 1e-3.
#pragma once

#include <span>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"

namespace kiln::train {

class GradClipper {
 public:
  /// `max_norm` > 0 and finite (the config checks it). Throws UnsupportedError when a gradient
  /// is not f32 or the backend has no f32 matmul or scale.
  GradClipper(Backend& backend, std::span<const Parameter> params, double max_norm);

  /// The global L2 norm of every parameter's gradient, in double on the host.
  double norm();
  /// Computes the norm and, when it exceeds max_norm, multiplies every gradient by
  /// max_norm / (norm + 1e-6) (PyTorch's factor). Returns the norm before clipping. Throws
  /// NumericError when the norm is inf or nan: scaling by it would write nan into every weight.
  double clip();

  double max_norm() const noexcept { return max_norm_; }

 private:
  Backend& backend_;
  double max_norm_;
  std::vector<Tensor> rows_;  // each gradient run viewed as a (1, n) matrix
  Tensor sum_device_, sum_host_;
};

}  // namespace kiln::train
