// Softmax cross-entropy with label smoothing over logits (B, K) f32 and labels (B) i32.
//
// Per row, with lse = max + log(sum exp(x - max)) (numerically stable) and target
// t = (1 - s) onehot(label) + s / K:
//   probs = exp(x - lse);  loss = -sum_k t_k (x_k - lse) = lse - (1 - s) x_label - (s / K) sum x
// stats[0] += sum of losses, stats[1] += rows whose argmax (first maximum) equals the label.
// Backward: dlogits = scale * (probs - t). A label outside [0, K) is an error naming the row.
// top_k_hits counts the rows whose label is among the k highest logits (the same tie rule as the
// argmax above: an equal logit ranks higher when its class index is lower).
#include <cmath>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

void check_labels(const OpCheck& check, const std::int32_t* labels, std::int64_t rows,
                  std::int64_t classes) {
  for (std::int64_t i = 0; i < rows; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      check.fail(fmt::format("labels[{}] = {} is outside [0, {}); the data source's labels must "
                             "match the model's num_classes",
                             i, labels[i], classes));
    }
  }
}

}  // namespace

void CpuBackend::softmax_xent_forward(const Tensor& probs, const Tensor& stats,
                                      const Tensor& logits, const Tensor& labels,
                                      float label_smoothing) {
  const OpCheck check(Op::softmax_xent_forward);
  const sdk::RowsClasses rc = sdk::check_softmax_xent_forward(check, probs, stats, logits, labels, label_smoothing);
  const std::int64_t rows = rc.rows, classes = rc.classes;
  const float* x = logits.data_as<float>();
  float* p = probs.data_as<float>();
  const std::int32_t* y = labels.data_as<std::int32_t>();
  check_labels(check, y, rows, classes);
  const float on_weight = 1.0f - label_smoothing;
  const float uniform_weight = label_smoothing / static_cast<float>(classes);

  // One row: writes probs, returns its loss and whether its argmax is the label.
  const auto row = [&](std::int64_t i, double& loss_sum, std::int64_t& correct) {
    const float* xi = x + i * classes;
    float* pi = p + i * classes;
    float max = xi[0];
    std::int64_t argmax = 0;
    for (std::int64_t k = 1; k < classes; ++k) {
      if (xi[k] > max) {
        max = xi[k];
        argmax = k;
      }
    }
    float sum_exp = 0.0f, sum_x = 0.0f;
#pragma omp simd reduction(+ : sum_exp, sum_x)
    for (std::int64_t k = 0; k < classes; ++k) {
      const float e = std::exp(xi[k] - max);
      pi[k] = e;
      sum_exp += e;
      sum_x += xi[k];
    }
    const float inv_sum = 1.0f / sum_exp;
#pragma omp simd
    for (std::int64_t k = 0; k < classes; ++k) pi[k] *= inv_sum;
    const float lse = max + std::log(sum_exp);
    loss_sum += static_cast<double>(lse - on_weight * xi[y[i]] - uniform_weight * sum_x);
    correct += argmax == y[i] ? 1 : 0;
  };
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  if (rows * classes > kParallelMinElements) {
    use_our_threads();
#pragma omp parallel for schedule(static) reduction(+ : loss_sum, correct)
    for (std::int64_t i = 0; i < rows; ++i) row(i, loss_sum, correct);
  } else {
    for (std::int64_t i = 0; i < rows; ++i) row(i, loss_sum, correct);
  }
  float* s = stats.data_as<float>();
  s[0] += static_cast<float>(loss_sum);
  s[1] += static_cast<float>(correct);
}

void CpuBackend::softmax_xent_backward(const Tensor& dlogits, const Tensor& probs,
                                       const Tensor& labels, float label_smoothing, float scale) {
  const OpCheck check(Op::softmax_xent_backward);
  const sdk::RowsClasses rc = sdk::check_softmax_xent_backward(check, dlogits, probs, labels, label_smoothing);
  const std::int64_t rows = rc.rows, classes = rc.classes;
  const float* p = probs.data_as<float>();
  float* d = dlogits.data_as<float>();
  const std::int32_t* y = labels.data_as<std::int32_t>();
  check_labels(check, y, rows, classes);
  const float uniform = scale * label_smoothing / static_cast<float>(classes);
  const float on = scale * (1.0f - label_smoothing);
  const auto row = [&](std::int64_t i) {
    const float* pi = p + i * classes;
    float* di = d + i * classes;
#pragma omp simd
    for (std::int64_t k = 0; k < classes; ++k) di[k] = scale * pi[k] - uniform;
    di[y[i]] -= on;
  };
  if (rows * classes > kParallelMinElements) {
    use_our_threads();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) row(i);
  } else {
    for (std::int64_t i = 0; i < rows; ++i) row(i);
  }
}

void CpuBackend::top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) {
  const OpCheck check(Op::top_k_hits);
  const sdk::RowsClasses rc = sdk::check_top_k_hits(check, count, logits, labels, k);
  const std::int64_t rows = rc.rows, classes = rc.classes;
  const float* x = logits.data_as<float>();
  const std::int32_t* y = labels.data_as<std::int32_t>();
  check_labels(check, y, rows, classes);
  std::int64_t hits = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* xi = x + i * classes;
    const float mine = xi[y[i]];
    if (std::isnan(mine)) continue;
    std::int64_t above = 0;  // stops at k: a row with k classes above its label cannot count
    for (std::int64_t c = 0; c < classes && above < k; ++c) above += xi[c] > mine || (xi[c] == mine && c < y[i]);
    hits += above < k ? 1 : 0;
  }
  count.data_as<float>()[0] += static_cast<float>(hits);
}

}  // namespace kiln::cpu
