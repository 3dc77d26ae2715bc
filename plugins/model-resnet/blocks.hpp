// ResNet's residual blocks (Bottleneck for ResNet-50/101/152, BasicBlock for ResNet-18/34), the
// shortcut they share, and the gradient-buffer sharing that keeps ResNet-50's memory down. Built
// from the SDK's generic layers (kiln/sdk/nn/cnn_layers.hpp); used only by this plugin.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kiln/sdk/nn/cnn_layers.hpp>

namespace kiln::resnet {

/// Every ResNet convolution starts as torchvision's ResNet does (kaiming normal, fan_out, ReLU
/// gain) and has no bias (a batch-norm follows each), so this plugin's weights match a
/// torchvision model's initial statistics and checkpoints load either way.
inline constexpr nn::ConvInit kConvInit = nn::ConvInit::kaiming_normal_fan_out_relu;

/// A residual block: out = relu(branch(x) + shortcut(x)).
class ResidualBlock {
 public:
  virtual ~ResidualBlock();
  virtual nn::ImageShape build(Backend& backend, std::int64_t max_batch, nn::ImageShape in, DType dtype) = 0;
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
  Downsample(nn::ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
             std::int64_t out_channels, std::int64_t stride);
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
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
  void build(Backend& backend, std::int64_t max_batch, nn::ImageShape in, nn::ImageShape out, DType dtype);
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
  Bottleneck(nn::ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
             std::int64_t planes, std::int64_t stride, nn::GammaInit last_gamma = nn::GammaInit::ones);
  nn::ImageShape build(Backend& backend, std::int64_t max_batch, nn::ImageShape in, DType dtype) override;
  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy, const GradReadyFn& ready) override;
  void append_buffers(std::vector<ModelBuffer>& out) const override;
  std::int64_t out_channels() const noexcept override { return planes_ * kExpansion; }
  std::vector<Tensor*> gradient_buffers() override;
  bool has_downsample() const noexcept { return join_.has_downsample(); }

 private:
  std::int64_t planes_;
  // Declaration order is parameter order (torchvision's): conv1, bn1, conv2, bn2, conv3, bn3.
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d conv3_;
  nn::BatchNorm2d bn3_;
  nn::ReluInPlace relu1_, relu2_;
  ResidualJoin join_{"Bottleneck"};  // its downsample's parameters come after the branch's
};

/// ResNet-18/34 block: 3x3 with the stride, 3x3, each followed by BN; ReLU after the first BN,
/// the tail ReLU fused with the residual add.
class BasicBlock final : public ResidualBlock {
 public:
  BasicBlock(nn::ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
             std::int64_t planes, std::int64_t stride, nn::GammaInit last_gamma = nn::GammaInit::ones);
  nn::ImageShape build(Backend& backend, std::int64_t max_batch, nn::ImageShape in, DType dtype) override;
  Tensor forward(const Tensor& x, Mode mode) override;
  Tensor backward(const Tensor& dy, const GradReadyFn& ready) override;
  void append_buffers(std::vector<ModelBuffer>& out) const override;
  std::int64_t out_channels() const noexcept override { return planes_; }
  std::vector<Tensor*> gradient_buffers() override;
  bool has_downsample() const noexcept { return join_.has_downsample(); }

 private:
  std::int64_t planes_;
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::ReluInPlace relu1_;
  ResidualJoin join_{"BasicBlock"};
};

}  // namespace kiln::resnet
