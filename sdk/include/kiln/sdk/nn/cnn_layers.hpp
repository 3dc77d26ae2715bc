// Generic convolutional layers with explicit forward and backward (model-specific blocks, such
// as ResNet's, live in their model's plugin).
//
// Same rules as layers.hpp: parameters are declared at construction, build() allocates outputs
// and input-gradient buffers for max_batch once, forward()/backward() use the first B rows,
// parameter gradients accumulate (+=), input gradients are overwritten (=). Activations are
// logical NCHW tensors, conv weights OIHW. A Conv2d writes its output in the backend's
// activation_layout() (nhwc on the cpu backend) and accepts either layout; batch-norm, ReLU and
// pooling give their outputs and input gradients the layout of what they are given (their
// buffers are plain bytes, retagged per call). Backend plans (OpPlan) are made per batch
// size on first use and kept, so a partial last batch costs one extra plan, not one per step.
// Batch-norm parameters and statistics stay f32 whatever the compute dtype (they are read from
// the master copy, Parameter::value).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"

namespace kiln::nn {

/// Per-sample shape of an image activation: (C, H, W).
struct ImageShape {
  std::int64_t c = 0, h = 0, w = 0;
  bool operator==(const ImageShape&) const = default;
};

/// OpPlans of one layer keyed by batch size (a handful at most: max_batch and a last batch).
class PlanCache {
 public:
  template <class MakeFn>
  OpPlan& get(std::int64_t batch, MakeFn&& make) {
    for (auto& [n, plan] : plans_) {
      if (n == batch) return *plan;
    }
    plans_.emplace_back(batch, make(batch));
    return *plans_.back().second;
  }

 private:
  std::vector<std::pair<std::int64_t, std::shared_ptr<OpPlan>>> plans_;
};

/// Geometry of a square-kernel convolution or pooling window.
struct Window {
  std::int64_t kernel = 1;
  std::int64_t stride = 1;
  std::int64_t padding = 0;
};

/// How a Conv2d's weight and bias start. Each model names its choice (no default), because the
/// right one depends on what follows the convolution.
enum class ConvInit : std::uint8_t {
  /// torchvision ResNet's kaiming_normal_(mode="fan_out", nonlinearity="relu"): W ~ N(0,
  /// sqrt(2 / (K k k))); a bias starts at 0 (torchvision's constant_(bias, 0)).
  kaiming_normal_fan_out_relu,
  /// PyTorch nn.Conv2d's own reset_parameters: kaiming_uniform_(a=sqrt(5)), i.e. W and b ~
  /// U(+-1/sqrt(C k k)).
  pytorch_default,
};

/// Whether a Conv2d adds a learned per-channel bias (off for a conv followed by batch-norm, whose
/// beta would make it redundant).
enum class ConvBias : std::uint8_t { none, learned };

/// y (B, K, P, Q) = conv(x (B, C, H, W), W (K, C, k, k)) [+ b (K) per output channel].
/// With a bias, parameters are "<prefix>.weight" then "<prefix>.bias" (no weight decay, as
/// Linear's); its gradient is dy summed over (B, P, Q).
class Conv2d {
 public:
  Conv2d(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
         std::int64_t out_channels, Window window, ConvInit init, ConvBias bias = ConvBias::none,
         InputGrad input_grad = InputGrad::compute);
  /// Allocates y and dx for `in`; returns the output shape. Throws ConfigError if the input is
  /// too small for the window, UnsupportedError if the backend lacks a conv op for dtype.
  ImageShape build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x);
  /// dW += conv_backward_filter(dy, x) (unless frozen, as the bias); returns dx (undefined with
  /// InputGrad::skip).
  Tensor backward(const Tensor& dy) { return backward(dy, input_grad_); }
  /// As above, with the input gradient asked per call (Linear::backward's rule).
  Tensor backward(const Tensor& dy, InputGrad input_grad);

  std::size_t weight_index() const noexcept { return weight_; }
  bool has_bias() const noexcept { return bias_ != kNoBias; }
  /// Index of "<prefix>.bias"; only when has_bias().
  std::size_t bias_index() const noexcept { return bias_; }
  ImageShape output_shape() const noexcept { return out_; }
  /// The input-gradient buffer (undefined with InputGrad::skip); see share_gradient_buffers().
  Tensor& input_grad_buffer() noexcept { return dx_; }
  /// The output buffer, for a model that lets layers whose backward never runs (a frozen
  /// prefix) share forward memory; forward() writes its first rows.
  Tensor& output_buffer() noexcept { return y_; }

 private:
  static constexpr std::size_t kNoBias = static_cast<std::size_t>(-1);
  Conv2dDesc desc(std::int64_t batch) const;
  void add_bias(const Tensor& y) const;
  void bias_backward(const Tensor& dy) const;

  ParameterStore& store_;
  std::string prefix_;
  std::int64_t in_c_, out_c_;
  Window win_;
  InputGrad input_grad_;
  std::size_t weight_ = 0;
  std::size_t bias_ = kNoBias;
  Tensor ones_;  // compute-dtype ones for the bias outer products (bias only)
  DType dtype_ = DType::f32;
  ImageShape in_{}, out_{};
  std::int64_t max_batch_ = 0;
  Backend* backend_ = nullptr;
  PlanCache plans_;
  OpPlan* plan_ = nullptr;  // the plan of the last forward, for backward
  Tensor y_, dx_, x_saved_;
};

/// How a BatchNorm2d's gamma starts: 1 (default) or 0 (the last BN of a residual branch with
/// zero_init_residual, so each block starts as the identity).
enum class GammaInit : std::uint8_t { ones, zeros };

/// Batch normalisation over (B, H, W) per channel; gamma "weight", beta "bias" (both exempt
/// from weight decay), running_mean/running_var buffers (0 and 1 at start), momentum 0.1,
/// eps 1e-5 (PyTorch's defaults). Train mode normalises with batch statistics and updates the
/// running ones; eval mode uses the running ones.
/// With the store's batch_norm_sync() set at build(), train mode takes the batch statistics and
/// the backward's per-channel gradient sums over every rank's batch (SyncBatchNorm).
class BatchNorm2d {
 public:
  BatchNorm2d(ParameterStore& store, const std::string& prefix, std::int64_t channels,
              GammaInit gamma_init = GammaInit::ones, float momentum = 0.1f, float eps = 1e-5f);
  /// Allocates y, dx, the saved statistics and the running-stat buffers.
  void build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x, Mode mode);
  /// dgamma, dbeta += ...; returns dx. Only after a Mode::train forward. With frozen statistics
  /// (below) only dx = dy * gamma / sqrt(running_var + eps).
  Tensor backward(const Tensor& dy);
  /// Whether the layer normalises with its running statistics in training too and never writes
  /// them: its weight and bias are both frozen and the store's frozen_bn is Mode::eval
  /// (ParameterStore::set_frozen(ctx)). Its buffers are then marked kBufferFrozen, and it does
  /// not synchronise under sync_bn. Decided by build().
  bool frozen_statistics() const noexcept { return frozen_statistics_; }

  std::size_t weight_index() const noexcept { return gamma_; }
  std::size_t bias_index() const noexcept { return beta_; }
  /// The input-gradient buffer; see share_gradient_buffers().
  Tensor& input_grad_buffer() noexcept { return dx_; }
  /// The output buffer (Conv2d::output_buffer()).
  Tensor& output_buffer() noexcept { return y_; }
  /// "<prefix>.running_mean" and "<prefix>.running_var" (f32, C); valid after build().
  const std::vector<ModelBuffer>& buffers() const noexcept { return buffers_; }

 private:
  BatchNormDesc desc(std::int64_t batch) const;
  void build_sync(Backend& backend);
  void sync_train_forward(const Tensor& y, const Tensor& x);
  void sync_backward(const Tensor& dx, const Tensor& dy);

  ParameterStore& store_;
  std::string prefix_;
  std::int64_t channels_;
  float momentum_, eps_;
  std::size_t gamma_ = 0, beta_ = 0;
  DType dtype_ = DType::f32;
  ImageShape in_{};
  std::int64_t max_batch_ = 0;
  Backend* backend_ = nullptr;
  PlanCache plans_;
  OpPlan* plan_ = nullptr;
  Mode last_mode_ = Mode::eval;
  Tensor y_, dx_, x_saved_, save_mean_, save_invstd_;
  bool frozen_statistics_ = false;
  Tensor zeros_;  // (C) f32 zeros: the mean and beta of the frozen-statistics backward
  std::vector<ModelBuffer> buffers_;
  // Synchronised batch-norm (sync_ non-null): per-channel f32 pairs on the device and their host
  // copies, the f64 values summed over ranks, and the global count of the last forward.
  BatchNormSync* sync_ = nullptr;
  Tensor stat_a_, stat_b_, host_a_, host_b_, host_c_, host_d_, host_e_;
  std::vector<double> summed_;
  std::int64_t global_count_ = 0;
};

/// Max pooling over a square window (PyTorch semantics: padding never wins).
class MaxPool2d {
 public:
  explicit MaxPool2d(Window window) : win_(window) {}
  ImageShape build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  ImageShape output_shape() const noexcept { return out_; }
  /// The output buffer (Conv2d::output_buffer()).
  Tensor& output_buffer() noexcept { return y_; }

 private:
  Pool2dDesc desc(std::int64_t batch) const;

  Window win_;
  DType dtype_ = DType::f32;
  ImageShape in_{}, out_{};
  std::int64_t max_batch_ = 0;
  Backend* backend_ = nullptr;
  PlanCache plans_;
  OpPlan* plan_ = nullptr;
  Tensor y_, dx_, x_saved_, y_saved_;
};

/// y (B, C) = mean of x (B, C, H, W) over (H, W).
class GlobalAvgPool {
 public:
  /// Returns the number of output features (C).
  std::int64_t build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);

 private:
  ImageShape in_{};
  std::int64_t max_batch_ = 0;
  Backend* backend_ = nullptr;
  Layout in_layout_ = Layout::row_major;  // of the last forward's input; dx is given the same
  Tensor y_, dx_;
};

/// (B, C, H, W) -> (B, C*H*W) with features in PyTorch's (C, H, W) order whatever the input's
/// layout, so a following Linear's weights match torch.flatten's. A row-major input is viewed
/// (no copy); a channels-last one is rearranged with Backend::convert_layout, and the gradient
/// is rearranged back into the layout of the forward's input.
class Flatten {
 public:
  /// Allocates the rearranging buffers; returns the number of output features (C*H*W).
  std::int64_t build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);

 private:
  ImageShape in_{};
  std::int64_t max_batch_ = 0;
  Backend* backend_ = nullptr;
  Layout in_layout_ = Layout::row_major;  // of the last forward's input; dx is given the same
  Tensor y_, dx_;
};

/// In-place ReLU over an image activation (the layer before it keeps what its own backward
/// needs, never its output, so overwriting that output is safe). Backward needs only y.
class ReluInPlace {
 public:
  void build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  /// The input-gradient buffer; see share_gradient_buffers().
  Tensor& input_grad_buffer() noexcept { return dx_; }

 private:
  ImageShape in_{};
  std::int64_t max_batch_ = 0;
  Backend* backend_ = nullptr;
  Tensor dx_, y_saved_;
};

}  // namespace kiln::nn
