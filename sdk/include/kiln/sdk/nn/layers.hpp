// Core layers with explicit forward and backward over Backend ops (llm.c style, no tape).
//
// Each layer is built once for a maximum batch (its output and input-gradient buffers are
// allocated then, sized (max_batch, ...)); forward() and backward() work on the first B rows.
// forward() saves exactly what backward() needs. Gradient rule: parameter gradients accumulate
// (+=), input gradients are overwritten (=). A layer whose input gradient nobody needs (the
// first layer of a model) is built with InputGrad::skip and returns an undefined tensor; a model
// that freezes parameters (ParameterStore::set_frozen) may also skip it per call. A layer never
// computes the gradient of a parameter the store marks frozen.
// Shapes: B = batch rows, F = input features, O = output features, K = classes.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"

namespace kiln::nn {

enum class InputGrad : std::uint8_t { compute, skip };

/// y (B, O) = x (B, F) W^T + b, with W (O, F) and b (O), PyTorch's default initialisation
/// (uniform in +-1/sqrt(F) for both).
class Linear {
 public:
  Linear(ParameterStore& store, const std::string& prefix, std::int64_t in_features,
         std::int64_t out_features, InputGrad input_grad = InputGrad::compute);
  /// Allocates y (max_batch, O) and dx (max_batch, F); checks the backend has the ops.
  void build(Backend& backend, std::int64_t max_batch, DType dtype);
  Tensor forward(const Tensor& x);
  /// dW += dy^T x, db += sum_rows(dy) (each unless frozen); returns dx = dy W (undefined with
  /// InputGrad::skip).
  Tensor backward(const Tensor& dy) { return backward(dy, input_grad_); }
  /// As above, with the input gradient asked per call: a layer built with InputGrad::skip has no
  /// buffer for it and refuses InputGrad::compute.
  Tensor backward(const Tensor& dy, InputGrad input_grad);

  std::size_t weight_index() const noexcept { return weight_; }
  std::size_t bias_index() const noexcept { return bias_; }
  std::int64_t in_features() const noexcept { return in_; }
  std::int64_t out_features() const noexcept { return out_; }

 private:
  ParameterStore& store_;
  std::int64_t in_, out_;
  InputGrad input_grad_;
  std::size_t weight_ = 0, bias_ = 0;
  Backend* backend_ = nullptr;
  Tensor y_, dx_, x_saved_;
};

/// y = act(x), element-wise over (B, F).
class ActivationLayer {
 public:
  explicit ActivationLayer(Activation act) : act_(act) {}
  void build(Backend& backend, std::int64_t max_batch, std::int64_t features, DType dtype);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  Activation activation() const noexcept { return act_; }

 private:
  Activation act_;
  Backend* backend_ = nullptr;
  Tensor y_, dx_, x_saved_, y_saved_;
};

/// Inverted dropout with probability p in training; identity in evaluation.
class Dropout {
 public:
  explicit Dropout(float p);
  void build(Backend& backend, std::int64_t max_batch, std::int64_t features, DType dtype);
  /// `seed` must differ per step and per layer; the mask is a pure function of it.
  Tensor forward(const Tensor& x, Mode mode, std::uint64_t seed);
  Tensor backward(const Tensor& dy);
  float p() const noexcept { return p_; }

 private:
  float p_;
  Backend* backend_ = nullptr;
  Tensor y_, dx_, mask_;
  std::int64_t rows_ = 0;
  Mode last_mode_ = Mode::eval;
};

/// Softmax cross-entropy with label smoothing, averaged by the caller's choice of scale.
/// Keeps a running [loss sum, correct count] on the device so reading metrics costs one sync per
/// epoch, not one per step.
class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(float label_smoothing = 0.0f) : smoothing_(label_smoothing) {}
  void build(Backend& backend, std::int64_t max_batch, std::int64_t classes);
  /// Computes probabilities for logits (B, K) and labels (B) i32 (device tensors) and adds the
  /// first `valid_rows` rows' loss and correct count to the running totals.
  void forward(const Tensor& logits, const Tensor& labels, std::int64_t valid_rows);
  /// dlogits (B, K) = scale * d(sum of losses)/dlogits for the last forward. Rows past
  /// valid_rows get zero gradient.
  Tensor backward(float scale);
  /// Zeroes the running totals.
  void reset_totals();
  /// {loss sum, correct count} since reset_totals() (synchronizes the backend).
  std::pair<double, double> totals();
  /// The running loss sum of totals() as a 1-element f32 device tensor, for work on it that must
  /// not wait for the device (the trainer folds its finiteness into the gradients' all-reduce).
  Tensor loss_sum_on_device() const { return stats_.view(0, {1}); }

 private:
  float smoothing_;
  Backend* backend_ = nullptr;
  Tensor probs_, dlogits_, labels_saved_, stats_, stats_host_;
  std::int64_t rows_ = 0, valid_ = 0;
};

/// Throws UnsupportedError naming `layer` if the backend lacks `op` for `dtype`.
void require_op(const Backend& backend, Op op, DType dtype, const char* layer);

}  // namespace kiln::nn
