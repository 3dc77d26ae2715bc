// NaiveBackend: the `naive` compute backend, every op of the contract as plain loops on the host.
//
// It is written to be read next to kiln/backend.hpp and kiln/ops.hpp, not to be fast. The rules
// it keeps, so a reader can check each op against its formula:
// - f32 only. supports() says so (backend.cpp's table), and every op refuses another dtype with
//   the base class's UnsupportedError after the SDK's shared argument check has passed.
// - Sums are accumulated in double and rounded to f32 once, when stored. That costs nothing a
//   scalar loop notices and makes this backend the closest one to the float64 reference the
//   conformance suite (`kiln plugins test`) judges against.
// - No streams: the host runs each op to the end before returning, so events are always
//   complete and synchronize() has nothing to wait for.
// - Image operands (4-D, logical N, C, H, W) are read and written through Image (image.hpp),
//   which maps (n, c, h, w) to a memory offset for either layout tag; so every image op honours
//   row_major (NCHW) and nhwc without a second copy of its loops.
// - Ops are member functions, one source file per family: backend.cpp (memory, ordering and the
//   support table), dense.cpp, elementwise.cpp, loss_optim.cpp, conv.cpp, batchnorm.cpp,
//   pool.cpp (pooling and image input), layout.cpp.
#pragma once

#include <kiln/backend.hpp>
#include <kiln/plugin_args.hpp>
#include <kiln/sdk/op_args.hpp>
#include <kiln/sdk/op_check.hpp>
#include <kiln/sdk/op_descs.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::naive {

/// The shared argument checks of kiln/sdk/op_args.hpp for this backend: its name in every
/// message ("naive backend, matmul: c is f32(3, 4) but must have shape (3, 5); ...") and host
/// memory for every operand.
class OpCheck : public sdk::OpCheck {
 public:
  explicit OpCheck(Op op) noexcept : sdk::OpCheck("naive", sdk::OperandMemory::host, op) {}
};

/// The OpPlan& a layer hands back as the plan type `Plan` this backend made, or an error naming
/// the op when the layer passes a plan made for another op or by another backend.
template <class Plan>
Plan& plan_as(const OpCheck& check, OpPlan& plan, const char* maker) {
  auto* ours = dynamic_cast<Plan*>(&plan);
  if (ours == nullptr) {
    check.fail(std::string("the plan passed was not made by the naive backend's ") + maker +
               "; pass the plan this layer got from " + maker + " for the same shapes");
  }
  return *ours;
}

/// The f32 elements of a tensor (the caller checked its dtype).
inline float* floats(const Tensor& t) { return t.data_as<float>(); }

class NaiveBackend final : public Backend {
 public:
  /// The backend has no parameters; `args` (ranks, run directory) is not needed either.
  explicit NaiveBackend(const PluginArgs& args);

  std::string_view name() const override { return "naive"; }
  DeviceInfo device() const override;
  bool supports(Op op, DType dtype) const override;
  Layout activation_layout(DType dtype) const override;

  // ---- memory and ordering (backend.cpp) ------------------------------------------------------
  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& t, double value) override;
  Tensor to_device(const Tensor& host) override;
  void synchronize() override {}
  std::shared_ptr<Event> record_event(StreamKind stream) override;
  void wait_event(StreamKind, const Event&) override {}
  void* native_stream(StreamKind) override { return nullptr; }

  // ---- dense.cpp ----------------------------------------------------------------------------------
  void matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb, float alpha,
              float beta, const Tensor& bias) override;
  void bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) override;

  // ---- elementwise.cpp ----------------------------------------------------------------------------
  void activation_forward(const Tensor& y, const Tensor& x, Activation act) override;
  void activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                           Activation act, Accumulate acc) override;
  void add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) override;
  void dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                       std::uint64_t seed) override;
  void dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) override;
  void add(const Tensor& c, const Tensor& a, const Tensor& b) override;
  void cast(const Tensor& dst, const Tensor& src) override;
  void scale(const Tensor& t, float factor) override;
  void lerp(const Tensor& dst, const Tensor& src, float weight) override;
  void check_finite(const Tensor& flag, const Tensor& t) override;

  // ---- layout.cpp ---------------------------------------------------------------------------------
  void convert_layout(const Tensor& dst, const Tensor& src) override;

  // ---- loss_optim.cpp -----------------------------------------------------------------------------
  void softmax_xent_forward(const Tensor& probs, const Tensor& stats, const Tensor& logits,
                            const Tensor& labels, float label_smoothing) override;
  void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                             float label_smoothing, float scale) override;
  void top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) override;
  void sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                  const SgdStep& step) override;
  void adam_update(const Tensor& param, const Tensor& m, const Tensor& v, const Tensor& grad,
                   const AdamStep& step) override;

  // ---- conv.cpp -----------------------------------------------------------------------------------
  std::shared_ptr<OpPlan> plan_conv2d(const Conv2dDesc& desc) override;
  void conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) override;
  void conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& w) override;
  void conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy, const Tensor& x,
                              Accumulate acc) override;

  // ---- batchnorm.cpp ------------------------------------------------------------------------------
  std::shared_ptr<OpPlan> plan_batchnorm(const BatchNormDesc& desc) override;
  void batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean,
                               const Tensor& save_invstd, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var) override;
  void batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var) override;
  void batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                          const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd) override;
  void batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) override;
  void batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat,
                                 const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                                 const Tensor& save_invstd) override;
  void batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                                const Tensor& sum_dy, const Tensor& sum_dy_xhat, std::int64_t count) override;

  // ---- pool.cpp -----------------------------------------------------------------------------------
  std::shared_ptr<OpPlan> plan_pool2d(const Pool2dDesc& desc) override;
  void pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) override;
  void pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                       const Tensor& y) override;
  void global_avgpool_forward(const Tensor& y, const Tensor& x) override;
  void global_avgpool_backward(const Tensor& dx, const Tensor& dy) override;
  void normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) override;

 private:
  /// Throws the base class's UnsupportedError ("backend 'naive' does not implement <op> for
  /// bf16 ...") unless `dtype` is f32. Called in each op after the shared argument check, with
  /// the dtype of the op's main operand (the compute dtype supports() is asked about).
  void require_f32(Op op, DType dtype) const {
    if (dtype != DType::f32) unsupported(op, dtype);
  }

  std::shared_ptr<Event> done_;  // the one always-complete event record_event hands out
};

}  // namespace kiln::naive
