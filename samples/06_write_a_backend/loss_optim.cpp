// The loss and the optimizers: softmax cross-entropy with label smoothing, forward and backward,
// and one SGD or Adam/AdamW step over a flat f32 buffer. The contract defines these over f32 only
// (the loss reads f32 logits, the optimizers update the f32 master weights), whatever the
// compute dtype; the shared checks refuse anything else.
//
// Softmax cross-entropy, per row of logits x (K classes) with label y and smoothing s:
//   target t_k = (1 - s) * [k == y] + s / K
//   lse       = max + log(sum_k exp(x_k - max))      (subtracting the max keeps exp finite)
//   probs_k   = exp(x_k - lse)
//   loss      = -sum_k t_k * (x_k - lse)
//   dlogits_k = scale * (probs_k - t_k)              (the gradient of scale * sum of losses)
// Top-k hits (the per-epoch top-5 accuracy): a row counts when fewer than k classes rank above
// its label, a class ranking above when its logit is greater, or equal with a lower index.
#include <cmath>
#include <string>

#include "naive_backend.hpp"

namespace kiln::naive {
namespace {

/// A label outside [0, K) would index past the row. Labels sit in host memory here, so unlike a
/// device backend this one can afford to read them and say which row is wrong.
void check_labels(const OpCheck& check, const std::int32_t* labels, std::int64_t rows, std::int64_t classes) {
  for (std::int64_t i = 0; i < rows; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      check.fail("labels[" + std::to_string(i) + "] = " + std::to_string(labels[i]) + " is outside [0, " +
                 std::to_string(classes) + "); the data source's labels must match the model's num_classes");
    }
  }
}

/// t_k of the formula above.
double target(std::int64_t k, std::int32_t label, std::int64_t classes, double smoothing) {
  return (k == label ? 1.0 - smoothing : 0.0) + smoothing / static_cast<double>(classes);
}

}  // namespace

void NaiveBackend::softmax_xent_forward(const Tensor& probs, const Tensor& stats, const Tensor& logits,
                                        const Tensor& labels, float label_smoothing) {
  const OpCheck check(Op::softmax_xent_forward);
  const sdk::RowsClasses rc = sdk::check_softmax_xent_forward(check, probs, stats, logits, labels, label_smoothing);
  const std::int64_t rows = rc.rows, classes = rc.classes;
  const std::int32_t* label = labels.data_as<std::int32_t>();
  check_labels(check, label, rows, classes);
  double loss_sum = 0.0, correct = 0.0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* x = floats(logits) + i * classes;
    float* p = floats(probs) + i * classes;
    std::int64_t argmax = 0;  // the first maximum, so ties are decided the same way everywhere
    for (std::int64_t k = 1; k < classes; ++k) {
      if (x[k] > x[argmax]) argmax = k;
    }
    const double max = x[argmax];
    double sum_exp = 0.0;
    for (std::int64_t k = 0; k < classes; ++k) sum_exp += std::exp(double{x[k]} - max);
    const double lse = max + std::log(sum_exp);
    for (std::int64_t k = 0; k < classes; ++k) {
      const double log_p = double{x[k]} - lse;
      p[k] = static_cast<float>(std::exp(log_p));
      loss_sum -= target(k, label[i], classes, label_smoothing) * log_p;
    }
    if (argmax == label[i]) correct += 1.0;
  }
  // stats accumulate over the calls of a step (and its micro-batches); the trainer zeroes them.
  float* s = floats(stats);
  s[0] = static_cast<float>(double{s[0]} + loss_sum);
  s[1] = static_cast<float>(double{s[1]} + correct);
}

void NaiveBackend::softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                         float label_smoothing, float scale) {
  const OpCheck check(Op::softmax_xent_backward);
  const sdk::RowsClasses rc = sdk::check_softmax_xent_backward(check, dlogits, probs, labels, label_smoothing);
  const std::int64_t rows = rc.rows, classes = rc.classes;
  const std::int32_t* label = labels.data_as<std::int32_t>();
  check_labels(check, label, rows, classes);
  const float* p = floats(probs);
  float* d = floats(dlogits);
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t k = 0; k < classes; ++k) {
      const double t = target(k, label[i], classes, label_smoothing);
      d[i * classes + k] = static_cast<float>(double{scale} * (double{p[i * classes + k]} - t));
    }
  }
}

void NaiveBackend::top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) {
  const OpCheck check(Op::top_k_hits);
  const sdk::RowsClasses rc = sdk::check_top_k_hits(check, count, logits, labels, k);
  const std::int64_t rows = rc.rows, classes = rc.classes;
  const std::int32_t* label = labels.data_as<std::int32_t>();
  check_labels(check, label, rows, classes);
  double hits = 0.0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* x = floats(logits) + i * classes;
    const float mine = x[label[i]];
    if (std::isnan(mine)) continue;  // NaN compares false with everything: it would always count
    std::int64_t above = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      if (x[c] > mine || (x[c] == mine && c < label[i])) ++above;
    }
    if (above < k) hits += 1.0;
  }
  float* n = floats(count);
  n[0] = static_cast<float>(double{n[0]} + hits);
}

void NaiveBackend::sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                              const SgdStep& step) {
  const OpCheck check(Op::sgd_update);
  sdk::check_sgd_update(check, param, momentum, grad, step);
  // PyTorch's SGD, as kiln/ops.hpp writes it:
  //   g = grad + weight_decay * p;  buf = momentum * buf + (1 - dampening) * g;
  //   g = nesterov ? g + momentum * buf : buf;  p -= lr * g
  // With momentum == 0 there is no buffer (momentum may be undefined) and g is used as it is.
  float* p = floats(param);
  const float* g_in = floats(grad);
  float* buf = step.momentum != 0.0f ? floats(momentum) : nullptr;
  const double lr = step.lr, mu = step.momentum, dampening = step.dampening, decay = step.weight_decay;
  for (std::int64_t i = 0; i < param.numel(); ++i) {
    double g = double{g_in[i]} + decay * double{p[i]};
    if (buf != nullptr) {
      const double b = mu * double{buf[i]} + (1.0 - dampening) * g;
      buf[i] = static_cast<float>(b);
      g = step.nesterov == SgdStep::Nesterov::yes ? g + mu * b : b;
    }
    p[i] = static_cast<float>(double{p[i]} - lr * g);
  }
}

void NaiveBackend::adam_update(const Tensor& param, const Tensor& m, const Tensor& v, const Tensor& grad,
                               const AdamStep& step) {
  const OpCheck check(Op::adam_update);
  sdk::check_adam_update(check, param, m, v, grad, step);
  // PyTorch's Adam (coupled decay: g += weight_decay * p) and AdamW (decoupled: p *= 1 - lr *
  // weight_decay before the update), without amsgrad; `step` counts from 1 for the bias
  // corrections 1 - beta^step.
  const double lr = step.lr, beta1 = step.beta1, beta2 = step.beta2, eps = step.eps, decay = step.weight_decay;
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step.step));
  const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(step.step));
  float* p = floats(param);
  float* m_data = floats(m);
  float* v_data = floats(v);
  const float* g_in = floats(grad);
  for (std::int64_t i = 0; i < param.numel(); ++i) {
    double w = p[i];
    double g = g_in[i];
    if (step.decay == AdamStep::Decay::coupled) {
      g += decay * w;
    } else {
      w *= 1.0 - lr * decay;
    }
    const double m_i = beta1 * double{m_data[i]} + (1.0 - beta1) * g;
    const double v_i = beta2 * double{v_data[i]} + (1.0 - beta2) * g * g;
    m_data[i] = static_cast<float>(m_i);
    v_data[i] = static_cast<float>(v_i);
    w -= lr * (m_i / correction1) / (std::sqrt(v_i / correction2) + eps);
    p[i] = static_cast<float>(w);
  }
}

}  // namespace kiln::naive
