// Convolutional layers and residual blocks (ResNet) with explicit forward and backward.
//
// Same rules as layers.hpp: parameters are declared at construction, build() allocates outputs
// and input-gradient buffers for max_batch once, forward()/backward() use the first B rows,
// parameter gradients accumulate (+=), input gradients are overwritten (=). Activations are
// logical NCHW tensors, conv weights OIHW. A Conv2d writes its output in the backend's
// activation_layout() (nhwc on the cpu backend) and accepts either layout; batch-norm, ReLU and
// pooling give their outputs and input gradients the layout of what they are given (their
// buffers are plain bytes, retagged per call); a residual block needs its input in the layout its
// convolutions produce (what the layer before it gives in a model). Backend plans (OpPlan) are made per batch
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
#include "kiln/nn/layers.hpp"
#include "kiln/nn/parameter_store.hpp"

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

/// y (B, K, P, Q) = conv(x (B, C, H, W), W (K, C, k, k)); no bias (a batch norm follows).
/// Init: kaiming normal, fan_out, ReLU gain (torchvision's ResNet): std = sqrt(2 / (K k k)).
class Conv2d {
 public:
  Conv2d(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
         std::int64_t out_channels, Window window, InputGrad input_grad = InputGrad::compute);
  /// Allocates y and dx for `in`; returns the output shape. Throws ConfigError if the input is
  /// too small for the window, UnsupportedError if the backend lacks a conv op for dtype.
  ImageShape build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x);
  /// dW += conv_backward_filter(dy, x); returns dx (undefined with InputGrad::skip).
  Tensor backward(const Tensor& dy);

  std::size_t weight_index() const noexcept { return weight_; }
  ImageShape output_shape() const noexcept { return out_; }
  /// The input-gradient buffer (undefined with InputGrad::skip); see share_gradient_buffers().
  Tensor& input_grad_buffer() noexcept { return dx_; }

 private:
  Conv2dDesc desc(std::int64_t batch) const;

  ParameterStore& store_;
  std::string prefix_;
  std::int64_t in_c_, out_c_;
  Window win_;
  InputGrad input_grad_;
  std::size_t weight_ = 0;
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
class BatchNorm2d {
 public:
  BatchNorm2d(ParameterStore& store, const std::string& prefix, std::int64_t channels,
              GammaInit gamma_init = GammaInit::ones, float momentum = 0.1f, float eps = 1e-5f);
  /// Allocates y, dx, the saved statistics and the running-stat buffers.
  void build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x, Mode mode);
  /// dgamma, dbeta += ...; returns dx. Only after a Mode::train forward.
  Tensor backward(const Tensor& dy);

  std::size_t weight_index() const noexcept { return gamma_; }
  std::size_t bias_index() const noexcept { return beta_; }
  /// The input-gradient buffer; see share_gradient_buffers().
  Tensor& input_grad_buffer() noexcept { return dx_; }
  /// "<prefix>.running_mean" and "<prefix>.running_var" (f32, C); valid after build().
  const std::vector<ModelBuffer>& buffers() const noexcept { return buffers_; }

 private:
  BatchNormDesc desc(std::int64_t batch) const;

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
  std::vector<ModelBuffer> buffers_;
};

/// Max pooling over a square window (PyTorch semantics: padding never wins).
class MaxPool2d {
 public:
  explicit MaxPool2d(Window window) : win_(window) {}
  ImageShape build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  ImageShape output_shape() const noexcept { return out_; }

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

/// A residual block: out = relu(branch(x) + shortcut(x)).
class ResidualBlock {
 public:
  virtual ~ResidualBlock();
  virtual ImageShape build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) = 0;
  virtual Tensor forward(const Tensor& x, Mode mode) = 0;
  /// Returns dx; reports every parameter of the block to `ready` once its gradient is complete.
  virtual Tensor backward(const Tensor& dy, const GradReadyFn& ready) = 0;
  /// Appends the running statistics of every batch norm of the block.
  virtual void append_buffers(std::vector<ModelBuffer>& out) const = 0;
  /// Output channels (planes x expansion).
  virtual std::int64_t out_channels() const noexcept = 0;
  /// Every activation-gradient buffer of the block, in a fixed order per block type (undefined
  /// entries for parts the block lacks, e.g. no downsample), for share_gradient_buffers().
  virtual std::vector<Tensor*> gradient_buffers() = 0;
};

/// Makes the activation-gradient buffers of `blocks` (all built) share memory: the i-th buffer of
/// every block becomes a view of one allocation sized for the largest of them. Safe because a
/// model runs block backwards one after another and a block reads its output gradient (the next
/// block's input gradient) only in its first op, before it writes any of these buffers; within a
/// block each buffer is distinct. Forward outputs are never shared (backward needs them). For
/// ResNet-50 at batch 8 this turns 16 sets of gradient buffers into one. Call after build().
void share_gradient_buffers(Backend& backend, const std::vector<ResidualBlock*>& blocks);

/// The shortcut of a block whose shape changes: 1x1 conv (stride) + BN, named
/// "<prefix>.downsample.0" and "<prefix>.downsample.1" as in torchvision.
struct Downsample {
  Downsample(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
             std::int64_t out_channels, std::int64_t stride);
  Conv2d conv;
  BatchNorm2d bn;
};

/// What every residual block shares: the shortcut (identity, or a Downsample), the fused
/// add+ReLU that joins it with the branch, and that join's backward. A block computes its branch
/// and hands the result to forward(); in backward it takes dsum from begin_backward(), runs its
/// branch backward from it, and lets finish_backward() add the shortcut's gradient into dx.
class ResidualJoin {
 public:
  /// `block` names the block in messages ("Bottleneck").
  explicit ResidualJoin(const char* block) : block_(block) {}
  /// Gives the join a projection shortcut (null: identity).
  void set_downsample(std::unique_ptr<Downsample> downsample) { downsample_ = std::move(downsample); }
  bool has_downsample() const noexcept { return downsample_ != nullptr; }
  /// Builds the downsample for the block input `in`, checks that the shortcut gives the branch's
  /// output shape `out`, and allocates the block output and dsum buffers.
  void build(Backend& backend, std::int64_t max_batch, ImageShape in, ImageShape out, DType dtype);
  /// y = relu(branch + shortcut(x)); the shortcut must be in the branch's layout.
  Tensor forward(const Tensor& x, const Tensor& branch, Mode mode);
  /// dsum = dy * (y > 0), the gradient of the pre-activation sum, which the branch's backward
  /// starts from. Also runs the downsample's backward (reporting its parameters to `ready`).
  Tensor begin_backward(const Tensor& dy, const GradReadyFn& ready);
  /// dx += the shortcut's gradient (dsum itself for an identity shortcut).
  void finish_backward(const Tensor& dx);
  /// The downsample's batch-norm running statistics.
  void append_buffers(std::vector<ModelBuffer>& out) const;
  /// dsum, then the downsample's conv and BN input gradients (null without a downsample).
  void append_gradient_buffers(std::vector<Tensor*>& out);

 private:
  const char* block_;
  std::unique_ptr<Downsample> downsample_;
  Backend* backend_ = nullptr;
  Tensor y_, y_saved_, dsum_;  // block output, its last rows, gradient of the pre-activation sum
  Tensor dshort_;              // the shortcut's gradient between begin_ and finish_backward()
};

/// ResNet-50/101/152 block (v1.5): 1x1 (in -> planes), 3x3 with the stride (planes -> planes),
/// 1x1 (planes -> 4 planes), each followed by BN; ReLU after the first two BNs; the tail ReLU is
/// fused with the residual add.
class Bottleneck final : public ResidualBlock {
 public:
  static constexpr std::int64_t kExpansion = 4;
  Bottleneck(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
             std::int64_t planes, std::int64_t stride, GammaInit last_gamma = GammaInit::ones);
  ImageShape build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) override;
  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy, const GradReadyFn& ready) override;
  void append_buffers(std::vector<ModelBuffer>& out) const override;
  std::int64_t out_channels() const noexcept override { return planes_ * kExpansion; }
  std::vector<Tensor*> gradient_buffers() override;
  bool has_downsample() const noexcept { return join_.has_downsample(); }

 private:
  std::int64_t planes_;
  // Declaration order is parameter order (torchvision's): conv1, bn1, conv2, bn2, conv3, bn3.
  Conv2d conv1_;
  BatchNorm2d bn1_;
  Conv2d conv2_;
  BatchNorm2d bn2_;
  Conv2d conv3_;
  BatchNorm2d bn3_;
  ReluInPlace relu1_, relu2_;
  ResidualJoin join_{"Bottleneck"};  // its downsample's parameters come after the branch's
};

/// ResNet-18/34 block: 3x3 with the stride, 3x3, each followed by BN; ReLU after the first BN,
/// the tail ReLU fused with the residual add.
class BasicBlock final : public ResidualBlock {
 public:
  BasicBlock(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
             std::int64_t planes, std::int64_t stride, GammaInit last_gamma = GammaInit::ones);
  ImageShape build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) override;
  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy, const GradReadyFn& ready) override;
  void append_buffers(std::vector<ModelBuffer>& out) const override;
  std::int64_t out_channels() const noexcept override { return planes_; }
  std::vector<Tensor*> gradient_buffers() override;
  bool has_downsample() const noexcept { return join_.has_downsample(); }

 private:
  std::int64_t planes_;
  Conv2d conv1_;
  BatchNorm2d bn1_;
  Conv2d conv2_;
  BatchNorm2d bn2_;
  ReluInPlace relu1_;
  ResidualJoin join_{"BasicBlock"};
};

}  // namespace kiln::nn
