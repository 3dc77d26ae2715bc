// Float64 reference implementations of every Backend op, written for clarity, not speed.
//
// Each follows the formula in kiln/backend.hpp and kiln/ops.hpp literally, on tensors in logical
// order (images NCHW, weights OIHW) as flat std::vector<double>. Where the contract leaves a
// choice the cpu backend made (gelu is the tanh approximation; average pooling counts padding
// in the divisor, PyTorch's count_include_pad=True; max-pool ties go to the first element,
// which the suite's inputs avoid), the reference makes the same choice and says so here.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/ops.hpp"

namespace kiln::conformance::ref {

using Vec = std::vector<double>;

// ---- dense --------------------------------------------------------------------------------------
/// c (M, N) = alpha op(a) op(b) + beta c0 [+ bias]; a is (M, K) or (K, M) if ta, b (K, N) or (N, K).
Vec matmul(std::int64_t m, std::int64_t n, std::int64_t k, const Vec& a, Transpose ta, const Vec& b,
           Transpose tb, double alpha, double beta, const Vec& c0, const Vec* bias);
/// db (N) = db0 (if acc) + column sums of dy (M, N).
Vec bias_grad(std::int64_t m, std::int64_t n, const Vec& dy, const Vec& db0, Accumulate acc);

// ---- element-wise -------------------------------------------------------------------------------
double activation(Activation act, double x);
/// d act / dx at x.
double activation_derivative(Activation act, double x);
/// The dropout keep decision of element i (kiln/rng.hpp: unit_float(derive_seed(seed, i)) >= p).
bool dropout_keep(std::uint64_t seed, std::int64_t i, float p);

// ---- loss and optimizers ------------------------------------------------------------------------
struct XentForward {
  Vec probs;              // (B, K)
  double loss_sum = 0.0;  // sum over rows of -sum_k target_k log p_k
  double correct = 0.0;   // rows whose argmax (first maximum) equals the label
};
XentForward softmax_xent_forward(std::int64_t b, std::int64_t k, const Vec& logits, const Vec& labels,
                                 double smoothing);
/// dlogits = scale (probs - target).
Vec softmax_xent_backward(std::int64_t b, std::int64_t k, const Vec& probs, const Vec& labels,
                          double smoothing, double scale);
/// Rows (B of logits (B, K)) whose label has fewer than `top` classes ranked above it: a greater
/// logit, or an equal one at a lower index. A NaN label logit never counts.
double top_k_hits(std::int64_t b, std::int64_t k, const Vec& logits, const Vec& labels, std::int64_t top);

/// One SGD step (ops.hpp SgdStep); updates param and momentum in place.
void sgd(Vec& param, Vec& momentum, const Vec& grad, const SgdStep& step);
/// One Adam/AdamW step (ops.hpp AdamStep); updates param, m and v in place.
void adam(Vec& param, Vec& m, Vec& v, const Vec& grad, const AdamStep& step);

// ---- convolution --------------------------------------------------------------------------------
Vec conv2d_forward(const Conv2dDesc& d, const Vec& x, const Vec& w);
Vec conv2d_backward_data(const Conv2dDesc& d, const Vec& dy, const Vec& w);
/// dw = dw0 (if acc) + gradient.
Vec conv2d_backward_filter(const Conv2dDesc& d, const Vec& dy, const Vec& x, const Vec& dw0, Accumulate acc);

// ---- batch normalisation ------------------------------------------------------------------------
struct BnTrain {
  Vec y, mean, invstd, running_mean, running_var;
};
/// Batch statistics (biased variance for normalising, unbiased for the running update).
BnTrain batchnorm_train(const BatchNormDesc& d, const Vec& x, const Vec& gamma, const Vec& beta,
                        const Vec& running_mean, const Vec& running_var);
Vec batchnorm_infer(const BatchNormDesc& d, const Vec& x, const Vec& gamma, const Vec& beta,
                    const Vec& running_mean, const Vec& running_var);
struct BnBackward {
  Vec dx, dgamma, dbeta;  // dgamma/dbeta include the accumulated starting values
};
BnBackward batchnorm_backward(const BatchNormDesc& d, const Vec& dy, const Vec& x, const Vec& gamma,
                              const Vec& mean, const Vec& invstd, const Vec& dgamma0, const Vec& dbeta0);

// ---- pooling and input ----------------------------------------------------------------------------
Vec pool2d_forward(const Pool2dDesc& d, const Vec& x);
Vec pool2d_backward(const Pool2dDesc& d, const Vec& dy, const Vec& x);
Vec global_avgpool_forward(std::int64_t n, std::int64_t c, std::int64_t hw, const Vec& x);
Vec global_avgpool_backward(std::int64_t n, std::int64_t c, std::int64_t hw, const Vec& dy);
/// dst (N, 3, H, W) from src (N, H, W, 3) u8 values.
Vec normalize_image(std::int64_t n, std::int64_t h, std::int64_t w, const Vec& src, const ImageNormalize& norm);

}  // namespace kiln::conformance::ref
