// ResNet's residual blocks (Bottleneck for ResNet-50/101/152, BasicBlock for ResNet-18/34), the
// shortcut they share, and the gradient-buffer sharing that keeps ResNet-50's memory down. Built
// from the SDK's generic layers (kiln/sdk/nn/cnn_layers.hpp); used only by this plugin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kiln/sdk/nn/cnn_layers.hpp>

#include "shared_buffers.hpp"

namespace kiln::resnet {

/// Every ResNet convolution starts as torchvision's ResNet does (kaiming normal, fan_out, ReLU
/// gain) and has no bias (a batch-norm follows each), so this plugin's weights match a
/// torchvision model's initial statistics and checkpoints load either way.
inline constexpr nn::ConvInit kConvInit = nn::ConvInit::kaiming_normal_fan_out_relu;

/// Where an activation-gradient buffer lives when share_gradient_buffers() lays them out. A
/// backward pass is a chain of ops, each reading its output gradient and writing its input
/// gradient, so two alternating slots (ping, pong) hold every intermediate gradient of a branch;
/// the three others hold what lives longer than one op:
///   sum:      dsum, read by the branch's last op and, for an identity shortcut, by the final add;
///   shortcut: the downsample's input gradient, added into dx at the end of the block (and,
///             while forward runs, when no slot holds a gradient, the downsample batch norm's
///             output, dead once the block's add has read it);
///   input:    the block's input gradient, which the block before reads as its dy.
enum class GradSlot : std::uint8_t { sum, ping, pong, shortcut, input };
inline constexpr std::size_t kGradSlots = 5;

/// One activation-gradient buffer of a layer and the slot it may share memory in.
struct GradientBuffer {
  GradSlot slot;
  Tensor* buffer;
};

/// Where a forward output lives when the model shares the outputs of the layers no backward
/// reaches (a frozen prefix: no parameter in them or before them trains). Nothing reads such an
/// output after the next layers have consumed it, except the prefix's last output, which the
/// first trained layer's backward reads and which nothing after it overwrites. Within a block the
/// layers alternate between two temporaries; block outputs alternate between two more, so a
/// block's input (the output before) survives until its shortcut has read it.
enum class ForwardSlot : std::uint8_t { temp_a, temp_b, out_even, out_odd };
inline constexpr std::size_t kForwardSlots = 4;

/// One forward output buffer of a layer and the slot it may share memory in.
struct ForwardBuffer {
  ForwardSlot slot;
  Tensor* buffer;
};

/// A residual block: out = relu(branch(x) + shortcut(x)).
class ResidualBlock {
 public:
  virtual ~ResidualBlock();
  virtual nn::ImageShape build(Backend& backend, std::int64_t max_batch, nn::ImageShape in, DType dtype) = 0;
  virtual Tensor forward(const Tensor& x, Mode mode) = 0;
  /// Returns dx; reports every parameter of the block to `ready` once its gradient is complete.
  /// `input_grad` skip says nobody needs dx (in a model: no parameter before the block trains,
  /// ParameterStore::trains_before(first_parameter())): the block then runs only the part whose
  /// gradients a trainable parameter of its own needs, none when all are frozen, and returns an
  /// undefined tensor. Frozen weights' gradients are skipped either way. (Every override repeats
  /// the default, so calls through the concrete types see it too.)
  virtual Tensor backward(const Tensor& dy, const GradReadyFn& ready,
                          nn::InputGrad input_grad = nn::InputGrad::compute) = 0;
  /// Index of the block's first parameter (its conv1's weight).
  virtual std::size_t first_parameter() const noexcept = 0;
  /// Appends the running statistics of every batch norm of the block.
  virtual void append_buffers(std::vector<ModelBuffer>& out) const = 0;
  /// Output channels (planes x expansion).
  virtual std::int64_t out_channels() const noexcept = 0;
  /// Every activation-gradient buffer of the block with its slot, in backward order (the parts
  /// the block lacks, e.g. no downsample, are left out), and last the downsample batch norm's
  /// output (see GradSlot::shortcut), for share_gradient_buffers(). No op of
  /// the block reads a buffer in the slot it writes, and none writes a slot another buffer still
  /// needs (the comments in residual.cpp walk through the order).
  virtual std::vector<GradientBuffer> gradient_buffers() = 0;
  /// Every forward output buffer of the block with its slot, the block output (the last batch
  /// norm's, which the join writes over) in `output`. The slots matter only where the model lets
  /// the outputs share memory, i.e. for a block whose backward never runs; a StageArena packs
  /// them apart and ignores the slots.
  virtual std::vector<ForwardBuffer> forward_buffers(ForwardSlot output) = 0;
};

/// Makes the activation-gradient buffers of `blocks` share memory: every buffer in one GradSlot
/// becomes a view of one allocation sized for the largest of them (SharedSlots; the model itself
/// uses SharedSlots per stage, resnet_model.cpp). Safe because a model runs block backwards one after another, a block
/// reads its output gradient (the next block's `input` slot) only in its first op, before it
/// writes any slot, and within a block a slot is rewritten only once its previous content is
/// dead. Forward outputs are never shared (backward needs them). For ResNet-50 at batch 8 this
/// turns 16 blocks' 11 buffers each, and the stem's 2, into 5 allocations. Call after build().
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
  /// output shape `out`, and allocates the dsum buffer.
  void build(Backend& backend, std::int64_t max_batch, nn::ImageShape in, nn::ImageShape out, DType dtype);
  /// y = relu(branch + shortcut(x)), written over `branch` (the last batch norm's output, which
  /// its backward does not read); the shortcut must be in the branch's layout.
  Tensor forward(const Tensor& x, const Tensor& branch, Mode mode);
  /// dsum = dy * (y > 0), the gradient of the pre-activation sum, which the branch's backward
  /// starts from. Also runs the downsample's backward (reporting its parameters to `ready`), as
  /// far as `block_input` (whether anyone needs the block's input gradient) and its frozen
  /// parameters ask: not at all when neither does.
  Tensor begin_backward(const Tensor& dy, const GradReadyFn& ready, nn::InputGrad block_input,
                        const nn::ParameterStore& store);
  /// dx += the shortcut's gradient (dsum itself for an identity shortcut). Only after a
  /// begin_backward() with block_input = compute.
  void finish_backward(const Tensor& dx);
  /// One past the index of the block's last parameter: the downsample's, which are declared
  /// after the branch's, or `branch_end` without one.
  std::size_t parameters_end(std::size_t branch_end) const noexcept {
    return downsample_ ? downsample_->bn.bias_index() + 1 : branch_end;
  }
  /// The downsample's batch-norm running statistics.
  void append_buffers(std::vector<ModelBuffer>& out) const;
  /// dsum, then the downsample's BN and conv input gradients (none without a downsample).
  void append_gradient_buffers(std::vector<GradientBuffer>& out);
  /// The downsample's conv and BN outputs in the two temporaries (none without a downsample):
  /// the join runs after the branch, whose temporaries are dead once its last BN has run.
  void append_forward_buffers(std::vector<ForwardBuffer>& out);

 private:
  const char* block_;
  std::unique_ptr<Downsample> downsample_;
  Backend* backend_ = nullptr;
  Tensor y_saved_, dsum_;      // block output (the branch's buffer), gradient of the pre-activation sum
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
  Tensor backward(const Tensor& dy, const GradReadyFn& ready,
                  nn::InputGrad input_grad = nn::InputGrad::compute) override;
  std::size_t first_parameter() const noexcept override { return conv1_.weight_index(); }
  void append_buffers(std::vector<ModelBuffer>& out) const override;
  std::int64_t out_channels() const noexcept override { return planes_ * kExpansion; }
  std::vector<GradientBuffer> gradient_buffers() override;
  std::vector<ForwardBuffer> forward_buffers(ForwardSlot output) override;
  bool has_downsample() const noexcept { return join_.has_downsample(); }

 private:
  const nn::ParameterStore& store_;  // which parameters are frozen
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
  Tensor backward(const Tensor& dy, const GradReadyFn& ready,
                  nn::InputGrad input_grad = nn::InputGrad::compute) override;
  std::size_t first_parameter() const noexcept override { return conv1_.weight_index(); }
  void append_buffers(std::vector<ModelBuffer>& out) const override;
  std::int64_t out_channels() const noexcept override { return planes_; }
  std::vector<GradientBuffer> gradient_buffers() override;
  std::vector<ForwardBuffer> forward_buffers(ForwardSlot output) override;
  bool has_downsample() const noexcept { return join_.has_downsample(); }

 private:
  const nn::ParameterStore& store_;
  std::int64_t planes_;
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::ReluInPlace relu1_;
  ResidualJoin join_{"BasicBlock"};
};

}  // namespace kiln::resnet
