// Gradient clipping by global norm (see the header).
#include "kiln/train/grad_clip.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kiln/errors.hpp"
#include "kiln/sdk/param_runs.hpp"

namespace kiln::train {

GradClipper::GradClipper(Backend& backend, std::span<const Parameter> params, double max_norm)
    : backend_(backend), max_norm_(max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm)) {
    throw ConfigError(fmt::format("gradient clipping needs a finite max norm > 0, got {}", max_norm));
  }
  for (const Op op : {Op::matmul, Op::scale}) {
    if (!backend.supports(op, DType::f32)) {
      throw UnsupportedError(fmt::format("backend '{}' cannot clip gradients: {} f32 is not supported; set "
                                         "optimizer.clip_grad_norm = 0",
                                         backend.name(), op_name(op)));
    }
  }
  for (const Tensor& run : sdk::grad_runs(params)) {
    if (run.dtype() != DType::f32) {
      throw UnsupportedError(fmt::format("gradient clipping needs f32 gradients, but a gradient run is {}",
                                         dtype_name(run.dtype())));
    }
    rows_.emplace_back(run.storage(), Shape{1, run.numel()}, DType::f32, run.offset_bytes());
  }
  sum_device_ = backend.allocate({1, 1}, DType::f32, MemoryKind::device);
  sum_host_ = host_tensor({1, 1}, DType::f32);
}

double GradClipper::norm() {
  if (rows_.empty()) return 0.0;
  // sum += g . g for every run: beta 0 for the first run starts the sum, 1 adds to it.
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    backend_.matmul(sum_device_, rows_[i], Transpose::no, rows_[i], Transpose::yes, 1.0f, i == 0 ? 0.0f : 1.0f,
                    Tensor{});
  }
  backend_.copy(sum_device_, sum_host_);  // a copy into host memory is complete when it returns
  return std::sqrt(static_cast<double>(sum_host_.data_as<float>()[0]));
}

double GradClipper::clip() {
  const double n = norm();
  if (!std::isfinite(n)) {
    throw NumericError(fmt::format("the global gradient norm is {} (optimizer.clip_grad_norm = {}); the run "
                                   "diverged, so it stops before the weights are updated",
                                   n, max_norm_));
  }
  if (n > max_norm_) {
    const auto factor = static_cast<float>(max_norm_ / (n + 1e-6));
    for (const Tensor& row : rows_) backend_.scale(row, factor);
  }
  return n;
}

}  // namespace kiln::train
