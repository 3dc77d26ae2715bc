// Shared argument checks of bias_grad, softmax cross-entropy, top-k hits, the fused optimizers and lerp
// (kiln/sdk/op_args.hpp). Their operands are matrices and flat f32 buffers, never image
// activations, so they must be row-major.
#include <fmt/format.h>

#include "kiln/sdk/op_args.hpp"

namespace kiln::sdk {
namespace {

void smoothing(const OpCheck& check, float s) {
  if (!(s >= 0.0f && s < 1.0f)) check.fail(fmt::format("label_smoothing = {} is outside [0, 1)", s));
}

/// A flat f32 optimizer buffer shaped like param.
void like_param(const OpCheck& check, const char* name, const Tensor& t, const Tensor& param) {
  check.usable(name, t).dtype(name, t, DType::f32).same_shape(name, t, "param", param);
}

}  // namespace

void check_bias_grad(const OpCheck& check, const Tensor& db, const Tensor& dy) {
  check.usable("db", db).usable("dy", dy).dtype("db", db, DType::f32).float_dtype("dy", dy);
  check.rank("dy", dy, 2).shape("db", db, {dy.dim(1)});
}

RowsClasses check_softmax_xent_forward(const OpCheck& check, const Tensor& probs, const Tensor& stats,
                                       const Tensor& logits, const Tensor& labels, float label_smoothing) {
  check.usable("probs", probs).usable("stats", stats).usable("logits", logits).usable("labels", labels);
  check.dtype("logits", logits, DType::f32).dtype("probs", probs, DType::f32);
  check.dtype("stats", stats, DType::f32).dtype("labels", labels, DType::i32);
  check.rank("logits", logits, 2).same_shape("probs", probs, "logits", logits);
  check.shape("labels", labels, {logits.dim(0)}).shape("stats", stats, {2});
  smoothing(check, label_smoothing);
  if (logits.dim(1) == 0) check.fail(fmt::format("logits {} has no classes", logits.describe()));
  return {logits.dim(0), logits.dim(1)};
}

RowsClasses check_softmax_xent_backward(const OpCheck& check, const Tensor& dlogits, const Tensor& probs,
                                        const Tensor& labels, float label_smoothing) {
  check.usable("dlogits", dlogits).usable("probs", probs).usable("labels", labels);
  check.dtype("dlogits", dlogits, DType::f32).dtype("probs", probs, DType::f32);
  check.dtype("labels", labels, DType::i32);
  check.rank("probs", probs, 2).same_shape("dlogits", dlogits, "probs", probs);
  check.shape("labels", labels, {probs.dim(0)});
  smoothing(check, label_smoothing);
  return {probs.dim(0), probs.dim(1)};
}

RowsClasses check_top_k_hits(const OpCheck& check, const Tensor& count, const Tensor& logits, const Tensor& labels,
                             std::int64_t k) {
  check.usable("count", count).usable("logits", logits).usable("labels", labels);
  check.dtype("count", count, DType::f32).dtype("logits", logits, DType::f32).dtype("labels", labels, DType::i32);
  check.rank("logits", logits, 2).shape("labels", labels, {logits.dim(0)}).shape("count", count, {1});
  if (logits.dim(1) == 0) check.fail(fmt::format("logits {} has no classes", logits.describe()));
  if (k < 1) check.fail(fmt::format("k = {} must be at least 1", k));
  return {logits.dim(0), logits.dim(1)};
}

void check_sgd_update(const OpCheck& check, const Tensor& param, const Tensor& momentum, const Tensor& grad,
                      const SgdStep& step) {
  check.usable("param", param).dtype("param", param, DType::f32);
  like_param(check, "grad", grad, param);
  // Plain SGD neither reads nor writes the momentum buffer, so it may be undefined.
  if (step.momentum == 0.0f) return;
  check.usable("momentum (required when momentum != 0)", momentum);
  like_param(check, "momentum", momentum, param);
}

void check_adam_update(const OpCheck& check, const Tensor& param, const Tensor& m, const Tensor& v,
                       const Tensor& grad, const AdamStep& step) {
  check.usable("param", param).dtype("param", param, DType::f32);
  like_param(check, "m", m, param);
  like_param(check, "v", v, param);
  like_param(check, "grad", grad, param);
  if (step.step < 1) {
    check.fail(fmt::format("step = {} but Adam's step count is 1-based; pass the number of "
                           "updates including this one",
                           step.step));
  }
}

void check_lerp(const OpCheck& check, const Tensor& dst, const Tensor& src, float weight) {
  check.usable("dst", dst).dtype("dst", dst, DType::f32);
  check.usable("src", src).dtype("src", src, DType::f32).same_shape("src", src, "dst", dst);
  // Written as a negated range test so that NaN fails it too.
  if (!(weight >= 0.0f && weight <= 1.0f)) check.fail(fmt::format("weight = {} must be in [0, 1]", weight));
}

}  // namespace kiln::sdk
