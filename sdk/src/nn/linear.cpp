// Linear layer: one matmul forward (bias fused), two matmuls and a row reduction backward.
#include <cmath>

#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "kiln/sdk/nn/layers.hpp"

namespace kiln::nn {

Linear::Linear(ParameterStore& store, const std::string& prefix, std::int64_t in_features,
               std::int64_t out_features, InputGrad input_grad)
    : store_(store), in_(in_features), out_(out_features), input_grad_(input_grad) {
  if (in_ < 1 || out_ < 1) {
    throw ConfigError(fmt::format("{}: Linear({}, {}) needs positive sizes", prefix, in_, out_));
  }
  // PyTorch's nn.Linear default: kaiming_uniform(a=sqrt(5)) for W, which is U(+-1/sqrt(in)),
  // and the same bound for b.
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  weight_ = store_.declare(prefix + ".weight", {out_, in_}, Init::uniform(-bound, bound));
  bias_ = store_.declare(prefix + ".bias", {out_}, Init::uniform(-bound, bound), kParamNoWeightDecay);
}

void Linear::build(Backend& backend, std::int64_t max_batch, DType dtype) {
  require_op(backend, Op::matmul, dtype, "Linear");
  require_op(backend, Op::bias_grad, dtype, "Linear");
  backend_ = &backend;
  y_ = backend.allocate({max_batch, out_}, dtype, MemoryKind::device);
  if (input_grad_ == InputGrad::compute) dx_ = backend.allocate({max_batch, in_}, dtype, MemoryKind::device);
}

Tensor Linear::forward(const Tensor& x) {
  const std::int64_t b = x.dim(0);
  if (x.rank() != 2 || x.dim(1) != in_) {
    throw BackendError(fmt::format("Linear({}, {}) got input {}", in_, out_, x.describe()));
  }
  x_saved_ = x;
  Tensor y = y_.rows(0, b);
  const Parameter& w = store_[weight_];
  const Parameter& bias = store_[bias_];
  backend_->matmul(y, x, Transpose::no, w.compute, Transpose::yes, 1.0f, 0.0f, bias.compute);
  return y;
}

Tensor Linear::backward(const Tensor& dy, InputGrad input_grad) {
  if (input_grad == InputGrad::compute && !dx_.defined()) {
    throw BackendError(fmt::format("Linear({}, {}): input gradient asked of a layer built without one", in_, out_));
  }
  const std::int64_t b = dy.dim(0);
  const Parameter& w = store_[weight_];
  const Parameter& bias = store_[bias_];
  // dW (O, F) += dy^T (O, B) x (B, F)
  if (!store_.frozen(weight_)) {
    backend_->matmul(w.grad, dy, Transpose::yes, x_saved_, Transpose::no, 1.0f, 1.0f, Tensor());
  }
  if (!store_.frozen(bias_)) backend_->bias_grad(bias.grad, dy, Accumulate::yes);
  if (input_grad == InputGrad::skip) return Tensor();
  Tensor dx = dx_.rows(0, b);
  // dx (B, F) = dy (B, O) W (O, F)
  backend_->matmul(dx, dy, Transpose::no, w.compute, Transpose::no, 1.0f, 0.0f, Tensor());
  return dx;
}

}  // namespace kiln::nn
