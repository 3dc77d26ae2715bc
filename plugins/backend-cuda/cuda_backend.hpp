// CudaBackend: the `cuda` compute backend (one device per rank; cuDNN convolution, batch-norm and
// pooling, cuBLAS/cuBLASLt GEMM, Kiln's own kernels for everything else).
//
// Decisions a reader must know: the device is chosen from the local rank before any other CUDA
// call; all ops are enqueued on one compute stream and return before the work is done (the
// contract's rule: read results on the host only after synchronize() or a host copy); a second,
// communication stream lets NCCL all-reduce overlap backward, ordered with events. Device memory
// comes from a caching allocator (no cudaMalloc in the steady state). Op bodies live in ops/*.cpp
// (one file per concern, member functions of this class) over launchers in kernels/ and the
// cuDNN/cuBLAS wrappers in dnn/; every CUDA, cuDNN and cuBLAS status goes through cuda_check.hpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "kiln/backend.hpp"
#include "kiln/plugin_args.hpp"
#include "dnn/algo_key.hpp"  // kDefaultConvWorkspaceMib (CUDA-free)

namespace kiln::cuda {

class DeviceAllocator;  // memory/device_allocator.hpp
class NvmlSampler;      // nvml/nvml_sampler.hpp

/// [backend] activation_layout: automatic (nhwc for f16/bf16, NCHW for f32) or one layout for all.
enum class ActivationLayoutChoice { automatic, nhwc, nchw };

class CudaBackend final : public Backend {
 public:
  /// Reads the [backend] parameters (device selection from args.ranks.local_rank, allow_tf32, ...).
  /// Throws BackendError naming the device and CUDA's message when no usable device exists.
  explicit CudaBackend(const PluginArgs& args);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  DeviceInfo device() const override;
  bool supports(Op op, DType dtype) const override;
  Layout activation_layout(DType dtype) const override;
  /// GPU utilisation and memory from NVML (device_utilisation_pct, device_memory_used_mib, ...).
  std::map<std::string, double> counters() const override;

  Tensor allocate(const Shape& shape, DType dtype, MemoryKind where) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& t, double value) override;
  Tensor to_device(const Tensor& host) override;

  void synchronize() override;
  std::shared_ptr<Event> record_event(StreamKind stream) override;
  void wait_event(StreamKind stream, const Event& event) override;
  void* native_stream(StreamKind stream) override;

  // ---- dnn group (op_table.hpp): ops/matmul_ops.cpp, conv_ops.cpp, batchnorm_ops.cpp, pool_ops.cpp
  void matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb,
              float alpha, float beta, const Tensor& bias) override;
  void bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) override;

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
  // Synchronised batch-norm on plan_batchnorm's plans, as Kiln kernels: ops/batchnorm_sync_ops.cpp.
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
  void convert_layout(const Tensor& dst, const Tensor& src) override;  // ops/layout_ops.cpp

  // ---- kernel group: ops/*.cpp over kernels/*.cu ---------------------------------------------
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

  void global_avgpool_forward(const Tensor& y, const Tensor& x) override;
  void global_avgpool_backward(const Tensor& dx, const Tensor& dy) override;
  void normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) override;

  // ---- for the op files (dnn group and kernel group) -----------------------------------------
  /// The compute stream every op is enqueued on.
  cudaStream_t compute_stream() const noexcept { return compute_; }
  /// cuDNN / cuBLAS / cuBLASLt handles bound to the compute stream (created in the constructor).
  cudnnHandle_t cudnn() const noexcept { return cudnn_; }
  cublasHandle_t cublas() const noexcept { return cublas_; }
  cublasLtHandle_t cublaslt() const noexcept { return cublaslt_; }
  /// Whether fp32 GEMMs/convolutions may use TF32 tensor-core math ([backend] allow_tf32).
  bool allow_tf32() const noexcept { return allow_tf32_; }
  /// Whether f32 convolutions without TF32 may use cuDNN's Winograd and FFT algorithms
  /// ([backend] conv_transforms; MathMode::fp32_transforms).
  bool conv_transforms() const noexcept { return conv_transforms_; }
  /// Whether convolution algorithms are chosen by timing them ([backend] cudnn_benchmark).
  bool cudnn_benchmark() const noexcept { return cudnn_benchmark_; }
  /// The most workspace one convolution algorithm may use, in MiB ([backend] conv_workspace_mib).
  std::int64_t conv_workspace_mib() const noexcept { return conv_workspace_mib_; }
  /// Whether a convolution's backward-data call may read the filter its forward laid out
  /// ([backend] conv_filter_reuse; dnn/filter_copy.hpp).
  bool conv_filter_reuse() const noexcept { return conv_filter_reuse_; }
  /// Counts a backward-data call that read its forward's filter copy (counters()).
  void count_conv_filter_reuse() noexcept { conv_filter_reuses_.fetch_add(1, std::memory_order_relaxed); }
  /// Device scratch of at least `bytes` from the caching allocator, valid until the returned
  /// tensor (u8) is dropped; usable by work enqueued on the compute stream before that.
  Tensor workspace(std::size_t bytes);
  /// Compute capability as major * 10 + minor (90 for H100/H200).
  int compute_capability() const noexcept { return cc_; }
  /// Counts a batch-norm training call by the mode it ran in; counters() reports both, so the
  /// GPU check shows whether the fast persistent kernels were reached.
  void count_batchnorm_mode(bool persistent) noexcept {
    (persistent ? bn_persistent_calls_ : bn_spatial_calls_).fetch_add(1, std::memory_order_relaxed);
  }

 private:
  int device_ = 0;
  int cc_ = 0;
  bool allow_tf32_ = false;
  bool cudnn_benchmark_ = false;
  std::int64_t conv_workspace_mib_ = kDefaultConvWorkspaceMib;
  bool conv_filter_reuse_ = true;
  ActivationLayoutChoice activation_layout_ = ActivationLayoutChoice::automatic;
  bool conv_transforms_ = false;
  DeviceInfo info_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  std::unique_ptr<DeviceAllocator> allocator_;
  std::unique_ptr<NvmlSampler> nvml_;
  // Runtime engineer's additions (cuda_backend.cpp): cuBLAS's workspace from the caching
  // allocator (so cuBLAS never cudaMallocs one per stream), and the teardown shared by the
  // destructor and a constructor that fails half-way.
  Tensor cublas_workspace_;
  void release_resources() noexcept;
  std::atomic<std::uint64_t> bn_persistent_calls_{0};
  std::atomic<std::uint64_t> bn_spatial_calls_{0};
  std::atomic<std::uint64_t> conv_filter_reuses_{0};
  std::atomic<std::size_t> largest_workspace_{0};  // bytes of the largest workspace() request
};

}  // namespace kiln::cuda
