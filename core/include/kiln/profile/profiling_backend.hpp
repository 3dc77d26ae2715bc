// ProfilingBackend: a Backend decorator that times every op the trainer's step makes, for
// `kiln train --profile` (docs/profiling.md).
//
// How the times are honest on asynchronous backends: while a step is being profiled, every call
// that enqueues work (ops, copy, fill, to_device) is followed by the inner backend's
// synchronize(), so an op's time is from its call to the end of its work and nothing queued
// before it is charged to it. That serialises the device (CUDA loses its overlap of host and
// device work, and an all-reduce running on the communication stream is waited for by the next
// op), so a profiled step is somewhat slower than an unprofiled one; the table says how much of
// the step the ops explain. On the cpu backend ops finish before they return and synchronize()
// costs nothing.
//
// Only steps count: between step_begin() and step_end() (the trainer's hooks), after the first
// `warmup_steps` steps (which include one-off plan and primitive creation). Calls outside a step
// (build, evaluation, checkpoints) pass through untimed, and so do calls from any thread but the
// one that began the step (backend.hpp lets loader threads allocate and copy into host memory).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "kiln/backend.hpp"
#include "kiln/profile/op_stats.hpp"

namespace kiln::profile {

class ProfilingBackend final : public Backend {
 public:
  ProfilingBackend(std::shared_ptr<Backend> inner, std::int64_t warmup_steps);

  /// Measures this machine's reference peaks on the inner backend (profile.hpp's Peaks): best of
  /// a few 1024^3 matmuls in `dtype` (f32 if the backend has no matmul in it) and of a 64 MiB
  /// copy. Takes about a second; call it before training.
  void measure_peaks(DType dtype);

  /// The trainer's step hooks.
  void step_begin();
  void step_end();

  /// What has been measured so far.
  const Profile& profile() const noexcept { return profile_; }

  // ---- Backend: pass-through ----
  std::string_view name() const override { return inner_->name(); }
  DeviceInfo device() const override { return inner_->device(); }
  bool supports(Op op, DType dtype) const override { return inner_->supports(op, dtype); }
  Layout activation_layout(DType dtype) const override { return inner_->activation_layout(dtype); }
  std::map<std::string, double> counters() const override { return inner_->counters(); }
  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override {
    return inner_->allocate(shape, dtype, where);
  }
  void synchronize() override { inner_->synchronize(); }
  std::shared_ptr<Event> record_event(StreamKind stream) override { return inner_->record_event(stream); }
  void wait_event(StreamKind stream, const Event& event) override { inner_->wait_event(stream, event); }
  void* native_stream(StreamKind stream) override { return inner_->native_stream(stream); }
  std::shared_ptr<OpPlan> plan_conv2d(const Conv2dDesc& desc) override { return inner_->plan_conv2d(desc); }
  std::shared_ptr<OpPlan> plan_batchnorm(const BatchNormDesc& desc) override {
    return inner_->plan_batchnorm(desc);
  }
  std::shared_ptr<OpPlan> plan_pool2d(const Pool2dDesc& desc) override { return inner_->plan_pool2d(desc); }

  // ---- Backend: timed ----
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& t, double value) override;
  Tensor to_device(const Tensor& host) override;
  void matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb, float alpha,
              float beta, const Tensor& bias) override;
  void bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) override;
  void activation_forward(const Tensor& y, const Tensor& x, Activation act) override;
  void activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y, Activation act,
                           Accumulate acc) override;
  void add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) override;
  void dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p, std::uint64_t seed) override;
  void dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) override;
  void add(const Tensor& c, const Tensor& a, const Tensor& b) override;
  void cast(const Tensor& dst, const Tensor& src) override;
  void convert_layout(const Tensor& dst, const Tensor& src) override;
  void scale(const Tensor& t, float factor) override;
  void check_finite(const Tensor& flag, const Tensor& t) override;
  void softmax_xent_forward(const Tensor& probs, const Tensor& stats, const Tensor& logits, const Tensor& labels,
                            float label_smoothing) override;
  void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                             float label_smoothing, float scale) override;
  void top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) override;
  void sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad, const SgdStep& step) override;
  void adam_update(const Tensor& param, const Tensor& m, const Tensor& v, const Tensor& grad,
                   const AdamStep& step) override;
  void lerp(const Tensor& dst, const Tensor& src, float weight) override;
  void conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) override;
  void conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& w) override;
  void conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy, const Tensor& x,
                              Accumulate acc) override;
  void batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                               const Tensor& x, const Tensor& gamma, const Tensor& beta,
                               const Tensor& running_mean, const Tensor& running_var) override;
  void batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean, const Tensor& running_var) override;
  void batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                          const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd) override;
  void batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) override;
  void batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat, const Tensor& dy,
                                 const Tensor& x, const Tensor& save_mean, const Tensor& save_invstd) override;
  void batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                                const Tensor& sum_dy, const Tensor& sum_dy_xhat, std::int64_t count) override;
  void pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) override;
  void pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                       const Tensor& y) override;
  void global_avgpool_forward(const Tensor& y, const Tensor& x) override;
  void global_avgpool_backward(const Tensor& dx, const Tensor& dy) override;
  void normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) override;

 private:
  using Clock = std::chrono::steady_clock;
  /// Runs `call`; inside a counted step, also synchronizes and charges the time and `work` to
  /// `name`. `work` is read after `call` returns, so the call may fill it in (to_device).
  template <class Call>
  void timed(std::string_view name, DType dtype, const Work& work, Call&& call);
  /// The same, for a row whose dtype column is not one dtype ("f32->f16" for cast).
  template <class Call>
  void timed(std::string_view name, std::string_view dtype, const Work& work, Call&& call);
  /// Takes the inner backend's allocator readings into profile_.memory: at a step's start
  /// (`after_op` null) or after the op of that row.
  void read_memory(const std::string* after_op);
  /// Inside a profiled step, on the thread that runs it.
  bool counting() const noexcept {
    return counting_.load(std::memory_order_acquire) && std::this_thread::get_id() == step_thread_.load();
  }

  std::shared_ptr<Backend> inner_;
  std::int64_t warmup_;
  std::int64_t steps_seen_ = 0;          // trainer thread only
  std::atomic<bool> counting_{false};    // read by any thread that calls an op
  std::atomic<std::thread::id> step_thread_{};
  Clock::time_point step_start_;
  Profile profile_;
};

}  // namespace kiln::profile
