// Inverted dropout. The mask is a pure function of the seed (see kiln/rng.hpp), so the same
// step reproduces the same mask on any backend.
#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "kiln/sdk/nn/layers.hpp"

namespace kiln::nn {

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0.0f && p < 1.0f)) throw ConfigError(fmt::format("dropout probability {} is not in [0, 1)", p));
}

void Dropout::build(Backend& backend, std::int64_t max_batch, std::int64_t features, DType dtype) {
  backend_ = &backend;
  if (p_ == 0.0f) return;  // identity in both modes; needs nothing
  require_op(backend, Op::dropout_forward, dtype, "Dropout");
  require_op(backend, Op::dropout_backward, dtype, "Dropout");
  y_ = backend.allocate({max_batch, features}, dtype, MemoryKind::device);
  dx_ = backend.allocate({max_batch, features}, dtype, MemoryKind::device);
  mask_ = backend.allocate({max_batch, features}, DType::u8, MemoryKind::device);
}

Tensor Dropout::forward(const Tensor& x, Mode mode, std::uint64_t seed) {
  last_mode_ = mode;
  if (mode == Mode::eval || p_ == 0.0f) return x;
  rows_ = x.dim(0);
  Tensor y = y_.rows(0, rows_);
  backend_->dropout_forward(y, mask_.rows(0, rows_), x, p_, seed);
  return y;
}

Tensor Dropout::backward(const Tensor& dy) {
  if (p_ == 0.0f) return dy;
  if (last_mode_ != Mode::train) throw BackendError("Dropout::backward after an evaluation forward");
  Tensor dx = dx_.rows(0, dy.dim(0));
  backend_->dropout_backward(dx, dy, mask_.rows(0, dy.dim(0)), p_);
  return dx;
}

}  // namespace kiln::nn
