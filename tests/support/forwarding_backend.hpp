// ForwardingBackend: a test Backend that hands every call to an inner backend, so that a test's
// wrapper overrides only the calls it watches or changes (counts casts, compares a convolution's
// weights, withdraws ops from supports(), runs ops late on a thread of its own).
//
// Queries, memory, ordering and plan_* go straight to inner(). Every op that enqueues work
// (fill and everything from matmul on) goes through run_op(), which runs it at once; a wrapper
// that plays an asynchronous stream overrides run_op() alone (test_async_upload's
// DeferredBackend). The function run_op() gets holds copies of the op's arguments (Tensor handles,
// step structs) and a pointer to its plan, so it may run after the call has returned.
//
// Header-only, for any test area: #include "../support/forwarding_backend.hpp".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "kiln/backend.hpp"

namespace kiln::test {

class ForwardingBackend : public Backend {
 public:
  /// Shares ownership of `inner`.
  explicit ForwardingBackend(std::shared_ptr<Backend> inner) : inner_(std::move(inner)) {}
  /// Borrows `inner` (a process-wide fixture backend), which must outlive this one.
  explicit ForwardingBackend(Backend& inner) : inner_(std::shared_ptr<Backend>(), &inner) {}

  Backend& inner() const { return *inner_; }

  // ---- queries -------------------------------------------------------------------------------
  std::string_view name() const override { return inner_->name(); }
  DeviceInfo device() const override { return inner_->device(); }
  bool supports(Op op, DType dtype) const override { return inner_->supports(op, dtype); }
  Layout activation_layout(DType dtype) const override { return inner_->activation_layout(dtype); }
  std::map<std::string, double> counters() const override { return inner_->counters(); }

  // ---- memory and ordering -------------------------------------------------------------------
  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override {
    return inner_->allocate(shape, dtype, where);
  }
  void copy(const Tensor& src, const Tensor& dst) override { inner_->copy(src, dst); }
  void fill(const Tensor& t, double value) override {
    run_op([=, this] { inner_->fill(t, value); });
  }
  Tensor to_device(const Tensor& host) override { return inner_->to_device(host); }
  void synchronize() override { inner_->synchronize(); }
  std::shared_ptr<Event> record_event(StreamKind stream) override { return inner_->record_event(stream); }
  void wait_event(StreamKind stream, const Event& event) override { inner_->wait_event(stream, event); }
  void* native_stream(StreamKind stream) override { return inner_->native_stream(stream); }

  // ---- dense, element-wise, loss, optimizers -------------------------------------------------
  void matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb, float alpha,
              float beta, const Tensor& bias) override {
    run_op([=, this] { inner_->matmul(c, a, ta, b, tb, alpha, beta, bias); });
  }
  void bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) override {
    run_op([=, this] { inner_->bias_grad(db, dy, acc); });
  }
  void activation_forward(const Tensor& y, const Tensor& x, Activation act) override {
    run_op([=, this] { inner_->activation_forward(y, x, act); });
  }
  void activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y, Activation act,
                           Accumulate acc) override {
    run_op([=, this] { inner_->activation_backward(dx, dy, x, y, act, acc); });
  }
  void add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) override {
    run_op([=, this] { inner_->add_relu_forward(y, x, residual); });
  }
  void dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p, std::uint64_t seed) override {
    run_op([=, this] { inner_->dropout_forward(y, mask, x, p, seed); });
  }
  void dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) override {
    run_op([=, this] { inner_->dropout_backward(dx, dy, mask, p); });
  }
  void add(const Tensor& c, const Tensor& a, const Tensor& b) override {
    run_op([=, this] { inner_->add(c, a, b); });
  }
  void cast(const Tensor& dst, const Tensor& src) override {
    run_op([=, this] { inner_->cast(dst, src); });
  }
  void convert_layout(const Tensor& dst, const Tensor& src) override {
    run_op([=, this] { inner_->convert_layout(dst, src); });
  }
  void scale(const Tensor& t, float factor) override {
    run_op([=, this] { inner_->scale(t, factor); });
  }
  void check_finite(const Tensor& flag, const Tensor& t) override {
    run_op([=, this] { inner_->check_finite(flag, t); });
  }
  void softmax_xent_forward(const Tensor& probs, const Tensor& stats, const Tensor& logits, const Tensor& labels,
                            float label_smoothing) override {
    run_op([=, this] { inner_->softmax_xent_forward(probs, stats, logits, labels, label_smoothing); });
  }
  void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                             float label_smoothing, float scale) override {
    run_op([=, this] { inner_->softmax_xent_backward(dlogits, probs, labels, label_smoothing, scale); });
  }
  void top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) override {
    run_op([=, this] { inner_->top_k_hits(count, logits, labels, k); });
  }
  void sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad, const SgdStep& step) override {
    run_op([=, this] { inner_->sgd_update(param, momentum, grad, step); });
  }
  void adam_update(const Tensor& param, const Tensor& m, const Tensor& v, const Tensor& grad,
                   const AdamStep& step) override {
    run_op([=, this] { inner_->adam_update(param, m, v, grad, step); });
  }
  void lerp(const Tensor& dst, const Tensor& src, float weight) override {
    run_op([=, this] { inner_->lerp(dst, src, weight); });
  }

  // ---- convolution, normalisation, pooling ---------------------------------------------------
  std::shared_ptr<OpPlan> plan_conv2d(const Conv2dDesc& desc) override { return inner_->plan_conv2d(desc); }
  void conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) override {
    run_op([=, this, p = &plan] { inner_->conv2d_forward(*p, y, x, w); });
  }
  void conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& w) override {
    run_op([=, this, p = &plan] { inner_->conv2d_backward_data(*p, dx, dy, w); });
  }
  void conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy, const Tensor& x,
                              Accumulate acc) override {
    run_op([=, this, p = &plan] { inner_->conv2d_backward_filter(*p, dw, dy, x, acc); });
  }
  std::shared_ptr<OpPlan> plan_batchnorm(const BatchNormDesc& desc) override { return inner_->plan_batchnorm(desc); }
  void batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                               const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var) override {
    run_op([=, this, p = &plan] {
      inner_->batchnorm_train_forward(*p, y, save_mean, save_invstd, x, gamma, beta, running_mean, running_var);
    });
  }
  void batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean, const Tensor& running_var) override {
    run_op([=, this, p = &plan] { inner_->batchnorm_infer_forward(*p, y, x, gamma, beta, running_mean, running_var); });
  }
  void batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                          const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd) override {
    run_op([=, this, p = &plan] {
      inner_->batchnorm_backward(*p, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd);
    });
  }
  void batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) override {
    run_op([=, this, p = &plan] { inner_->batchnorm_stats(*p, mean, var, x); });
  }
  void batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat, const Tensor& dy,
                                 const Tensor& x, const Tensor& save_mean, const Tensor& save_invstd) override {
    run_op([=, this, p = &plan] {
      inner_->batchnorm_backward_reduce(*p, sum_dy, sum_dy_xhat, dy, x, save_mean, save_invstd);
    });
  }
  void batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                                const Tensor& sum_dy, const Tensor& sum_dy_xhat, std::int64_t count) override {
    run_op([=, this, p = &plan] {
      inner_->batchnorm_backward_elemt(*p, dx, dy, x, gamma, save_mean, save_invstd, sum_dy, sum_dy_xhat, count);
    });
  }
  std::shared_ptr<OpPlan> plan_pool2d(const Pool2dDesc& desc) override { return inner_->plan_pool2d(desc); }
  void pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) override {
    run_op([=, this, p = &plan] { inner_->pool2d_forward(*p, y, x); });
  }
  void pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y) override {
    run_op([=, this, p = &plan] { inner_->pool2d_backward(*p, dx, dy, x, y); });
  }
  void global_avgpool_forward(const Tensor& y, const Tensor& x) override {
    run_op([=, this] { inner_->global_avgpool_forward(y, x); });
  }
  void global_avgpool_backward(const Tensor& dx, const Tensor& dy) override {
    run_op([=, this] { inner_->global_avgpool_backward(dx, dy); });
  }
  void normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) override {
    run_op([=, this] { inner_->normalize_image(dst, src, norm); });
  }

 protected:
  /// Runs one op on the inner backend; here at once, in the caller's thread.
  virtual void run_op(std::function<void()> op) { op(); }

 private:
  std::shared_ptr<Backend> inner_;  // non-owning (empty control block) when borrowed
};

}  // namespace kiln::test
