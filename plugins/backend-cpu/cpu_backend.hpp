// CpuBackend: the `cpu` compute backend (host memory, oneDNN matmul/conv/batch-norm/pooling,
// OpenMP element-wise loops).
//
// Decisions a reader must know: there are no streams on the CPU, so every op has finished when
// it returns (record_event hands back an already complete event, synchronize does nothing);
// every MemoryKind is plain 64-byte aligned host memory; all ops run on the calling thread's
// OpenMP team of `threads_` threads. Op bodies live in ops/*.cpp, one file per concern, as
// member functions of this class; argument checks are the SDK's shared ones (kiln/sdk/op_args.hpp, op_descs.hpp) through validate.hpp's OpCheck;
// what it implements is op_table.hpp. Planned ops (conv2d,
// batch-norm, pooling) keep their primitives, reorders and workspaces in the OpPlan they return.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/backend.hpp"
#include "kiln/plugin_args.hpp"
#include "ops/conv_paths.hpp"
#include "ops/dnnl_edge.hpp"
#include "ops/matmul.hpp"

namespace kiln::cpu {

/// Which conv plans compute pointwise convolutions on channels-last tensors as matmuls
/// (ops/conv1x1_matmul.hpp): none; f32 plans' backward-data only; f32 plans in all three
/// directions; or all plans.
enum class Conv1x1Mode : std::uint8_t { conv, f32_backward_data_matmul, f32_matmul, matmul };

/// Who computes convolutions' backward-filter (where the 1x1 matmul or a Winograd path does not):
/// oneDNN's backward-weights primitive, or Kiln's AVX2 kernel (ops/conv_filter_avx2.hpp) where it
/// fits and pays, in plans that compute in f32.
enum class ConvFilterMode : std::uint8_t { onednn, kiln_avx2 };

/// Who computes the forward and backward-data of convolutions that neither a 1x1 matmul nor a
/// Winograd path takes: oneDNN's primitives, or Kiln's AVX2 direct convolution
/// (ops/conv_direct_avx2.hpp) where it fits and pays, in plans that compute in f32.
enum class ConvDirectMode : std::uint8_t { onednn, kiln_avx2 };

/// How conv plans that compute in f32 run 3x3 convolutions: oneDNN's direct convolution, oneDNN's
/// Winograd kernels (AVX-512), or Kiln's own Winograd (ops/winograd3x3.hpp, AVX2 and FMA).
enum class Conv3x3Mode : std::uint8_t { direct, onednn_winograd, kiln_winograd };

class CpuBackend final : public Backend {
 public:
  /// Reads `threads` from args.params (0 = all cores / args.ranks.local_world_size) and
  /// `bf16_compute` ("auto": oneDNN's bf16 kernels where it has them, else bf16 is stored and
  /// computed in f32; "f32": always the latter, so AVX-512 machines can test that path).
  /// `conv_layout` chooses the activation layout inside the convolutions, `conv1x1` whether
  /// pointwise convolutions run as matmuls, `conv3x3` whether 3x3 ones run by Winograd,
  /// `conv_filter` who computes backward-filters, `conv_direct` who computes the other directions
  /// of the convolutions neither takes (see cpu_backend.cpp). Throws ConfigError for a negative thread count, an unknown bf16_compute,
  /// conv_layout, conv1x1 or conv3x3, or a Winograd conv3x3 the CPU has no kernels for.
  explicit CpuBackend(const PluginArgs& args);
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  DeviceInfo device() const override { return info_; }
  bool supports(Op op, DType dtype) const override;
  Layout activation_layout(DType dtype) const override;

  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& t, double value) override;
  Tensor to_device(const Tensor& host) override;

  void synchronize() override {}
  std::shared_ptr<Event> record_event(StreamKind stream) override;
  void wait_event(StreamKind, const Event&) override {}
  void* native_stream(StreamKind) override { return nullptr; }

  void matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb,
              float alpha, float beta, const Tensor& bias) override;
  void bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) override;

  void activation_forward(const Tensor& y, const Tensor& x, Activation act) override;
  void activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                           Activation act, Accumulate acc) override;
  void add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) override;
  void dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                       std::uint64_t seed) override;
  void dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) override;
  void add(const Tensor& c, const Tensor& a, const Tensor& b) override;
  void cast(const Tensor& dst, const Tensor& src) override;
  void convert_layout(const Tensor& dst, const Tensor& src) override;
  void scale(const Tensor& t, float factor) override;
  void check_finite(const Tensor& flag, const Tensor& t) override;

  void softmax_xent_forward(const Tensor& probs, const Tensor& stats, const Tensor& logits,
                            const Tensor& labels, float label_smoothing) override;
  void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                             float label_smoothing, float scale) override;
  void top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) override;

  void sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                  const SgdStep& step) override;
  void adam_update(const Tensor& param, const Tensor& m, const Tensor& v, const Tensor& grad,
                   const AdamStep& step) override;
  void lerp(const Tensor& dst, const Tensor& src, float weight) override;

  std::shared_ptr<OpPlan> plan_conv2d(const Conv2dDesc& desc) override;
  void conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) override;
  void conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy,
                            const Tensor& w) override;
  void conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy, const Tensor& x,
                              Accumulate acc) override;

  std::shared_ptr<OpPlan> plan_batchnorm(const BatchNormDesc& desc) override;
  void batchnorm_train_forward(OpPlan& plan, const Tensor& y, const Tensor& save_mean,
                               const Tensor& save_invstd, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var) override;
  void batchnorm_infer_forward(OpPlan& plan, const Tensor& y, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta,
                               const Tensor& running_mean, const Tensor& running_var) override;
  void batchnorm_backward(OpPlan& plan, const Tensor& dx, const Tensor& dgamma,
                          const Tensor& dbeta, const Tensor& dy, const Tensor& x,
                          const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd) override;
  void batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) override;
  void batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat, const Tensor& dy,
                                 const Tensor& x, const Tensor& save_mean, const Tensor& save_invstd) override;
  void batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                                const Tensor& sum_dy, const Tensor& sum_dy_xhat, std::int64_t count) override;

  std::shared_ptr<OpPlan> plan_pool2d(const Pool2dDesc& desc) override;
  void pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) override;
  void pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                       const Tensor& y) override;
  void global_avgpool_forward(const Tensor& y, const Tensor& x) override;
  void global_avgpool_backward(const Tensor& dx, const Tensor& dy) override;

  void normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) override;

  /// How many convolution calls each path computed on this backend (ops/conv_paths.hpp).
  const ConvPathCounts& conv_paths() const { return conv_paths_; }

 private:
  /// oneDNN and `omp parallel` use the calling thread's OpenMP thread count; the trainer thread
  /// may not be the one that built the backend, so each op makes sure it is ours.
  void use_our_threads() const;

  int threads_ = 1;
  DeviceInfo info_;
  dnnl::engine engine_;
  bool bf16_primitives_ = false;  // bf16 runs on oneDNN's bf16 primitives (else widened to f32)
  Conv3x3Mode conv3x3_ = Conv3x3Mode::direct;  // how f32-computing 3x3 convolutions run where it pays
  bool blocked_conv_layout_ = false;  // convolutions reorder nhwc activations into oneDNN's layout
  Conv1x1Mode conv1x1_ = Conv1x1Mode::conv;  // which plans run pointwise convolutions as matmuls
  ConvFilterMode conv_filter_ = ConvFilterMode::onednn;  // who computes backward-filters
  ConvDirectMode conv_direct_ = ConvDirectMode::onednn;  // who computes the other directions left
  dnnl::stream stream_;
  std::unique_ptr<MatmulCache> matmuls_;
  std::shared_ptr<EdgeScratch> edge_scratch_ = std::make_shared<EdgeScratch>();  // ops/dnnl_edge.hpp
  std::shared_ptr<Event> done_;  // the one always-complete event record_event returns
  ConvPathCounts conv_paths_;
};

}  // namespace kiln::cpu
