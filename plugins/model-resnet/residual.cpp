// Residual blocks (torchvision ResNet v1.5): Bottleneck (ResNet-50/101/152) and BasicBlock
// (ResNet-18/34), out = relu(branch(x) + shortcut(x)) with the ReLU fused into the add.
//
// Backward rule (the block input x has two consumers, the branch and the shortcut):
//   dsum = dy * (out > 0)                          (the fused add+ReLU)
//   dx   = branch_backward(dsum) + shortcut_backward(dsum)
// where shortcut_backward is the identity or the downsample conv+BN. The branch's first conv
// writes its input gradient into its own buffer (=), and the shortcut's gradient is then added
// into that same buffer (backend add, in place), so the residual gradient accumulates into the
// block input gradient without an extra buffer. ResidualJoin holds that shared part (shortcut,
// fused add+ReLU, dsum); each block adds only its branch. Parameters are reported ready in
// reverse declaration order: downsample first, then bn3/conv3 ... bn1/conv1.
//
// Frozen parameters (ParameterStore::set_frozen): the model asks for a block's input gradient
// only when a parameter declared before the block trains. When it does not, the branch runs
// backward from the top only down to its lowest unit with a trainable parameter, the downsample
// only if its own parameters train, and the block returns no dx. The convolutions skip frozen
// weight gradients themselves. The trainable gradients are the same bits either way: each is
// computed by the same ops from the same inputs.
#include <fmt/format.h>

#include <kiln/sdk/nn/image_check.hpp>
#include "blocks.hpp"

namespace kiln::resnet {
using nn::Conv2d;
using nn::BatchNorm2d;
using nn::ImageShape;
using nn::ParameterStore;
using nn::GammaInit;
using nn::ReluInPlace;
using nn::Window;
namespace detail = nn::detail;
namespace {

void report(const GradReadyFn& ready, const Conv2d& conv, const BatchNorm2d& bn) {
  if (!ready) return;
  ready(bn.weight_index());
  ready(bn.bias_index());
  ready(conv.weight_index());
}

/// Who needs the gradient flowing into a block's layer whose first parameter is `index`: the
/// layers below it in the block if one of theirs trains, and whoever asked for the block's input
/// gradient (`block_input`).
struct BranchNeeds {
  const ParameterStore& store;
  nn::InputGrad block_input;
  bool below(std::size_t index) const {
    return block_input == nn::InputGrad::compute || store.trains_before(index);
  }
};

/// Backward through one conv -> BN [-> ReLU] unit of a branch from the gradient of its output:
/// the ReLU, the BN, then the conv, which computes its input gradient only when something below
/// needs it. Returns that gradient, or an undefined tensor where the branch's backward has
/// stopped: `dy` undefined, or nothing in the unit or below it needs a gradient.
Tensor unit_backward(const Tensor& dy, Conv2d& conv, BatchNorm2d& bn, ReluInPlace* relu, const BranchNeeds& needs,
                     const GradReadyFn& ready) {
  if (!dy.defined() || !needs.below(bn.bias_index() + 1)) return Tensor();
  const Tensor d = relu != nullptr ? relu->backward(dy) : dy;
  Tensor dx = conv.backward(bn.backward(d), needs.below(conv.weight_index()) ? nn::InputGrad::compute
                                                                              : nn::InputGrad::skip);
  report(ready, conv, bn);
  return dx;
}

void require_residual_ops(const Backend& backend, DType dtype, const char* block) {
  nn::require_op(backend, Op::add_relu_forward, dtype, block);
  nn::require_op(backend, Op::activation_backward, dtype, block);
  nn::require_op(backend, Op::add, dtype, block);
}

/// The residual add walks both operands in memory order, so the shortcut (the block's input or
/// the downsample's output) must be in the layout the branch's convolutions produced.
void check_shortcut_layout(const Tensor& shortcut, const Tensor& branch, const char* block) {
  if (shortcut.layout() != branch.layout()) {
    throw BackendError(fmt::format("{}: the input {} is not in the layout its convolutions produce "
                                   "({}); feed residual blocks activations in the backend's "
                                   "activation_layout(), as the layer before a block does in a model",
                                   block, shortcut.describe(), branch.describe()));
  }
}

}  // namespace

ResidualBlock::~ResidualBlock() = default;

Downsample::Downsample(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
                       std::int64_t out_channels, std::int64_t stride)
    : conv(store, prefix + ".downsample.0", in_channels, out_channels, Window{1, stride, 0}, kConvInit),
      bn(store, prefix + ".downsample.1", out_channels) {}

// ---- ResidualJoin ---------------------------------------------------------------------------

void ResidualJoin::build(Backend& backend, std::int64_t max_batch, ImageShape in, ImageShape out, DType dtype) {
  require_residual_ops(backend, dtype, block_);
  if (downsample_) {
    const ImageShape d = downsample_->conv.build(backend, max_batch, in, dtype);
    downsample_->bn.build(backend, max_batch, d, dtype);
    if (!(d == out)) {
      throw BackendError(fmt::format("{}: downsample and branch shapes differ (a bug in the block)", block_));
    }
  } else if (!(in == out)) {
    throw BackendError(fmt::format("{}: identity shortcut with a shape change (a bug in the block)", block_));
  }
  dsum_ = backend.allocate({max_batch, out.c, out.h, out.w}, dtype, MemoryKind::device);
  backend_ = &backend;
}

Tensor ResidualJoin::forward(const Tensor& x, const Tensor& branch, Mode mode) {
  detail::check_built(backend_, block_, "block");
  const Tensor shortcut = downsample_ ? downsample_->bn.forward(downsample_->conv.forward(x), mode) : x;
  check_shortcut_layout(shortcut, branch, block_);
  // The block output overwrites the branch's last batch-norm output in place: that batch norm's
  // backward reads its input, not its output, so the block keeps one full-size tensor here
  // (its output, which backward reads for relu') instead of two, as torchvision's `out +=
  // identity; relu(out)` does. add_relu_forward is element-wise, so y may alias x.
  backend_->add_relu_forward(branch, branch, shortcut);
  y_saved_ = branch;
  return y_saved_;
}

Tensor ResidualJoin::begin_backward(const Tensor& dy, const GradReadyFn& ready, nn::InputGrad block_input,
                                    const ParameterStore& store) {
  if (!y_saved_.defined()) throw BackendError(fmt::format("{}: backward() before forward()", block_));
  Tensor dsum = dsum_.rows(0, dy.dim(0)).with_layout(dy.layout());
  backend_->activation_backward(dsum, dy, y_saved_, y_saved_, Activation::relu, Accumulate::no);
  dshort_ = block_input == nn::InputGrad::compute ? dsum : Tensor();
  if (downsample_) {
    Conv2d& conv = downsample_->conv;
    BatchNorm2d& bn = downsample_->bn;
    const bool trains = !store.frozen(conv.weight_index()) || !store.frozen(bn.weight_index()) ||
                        !store.frozen(bn.bias_index());
    if (trains || block_input == nn::InputGrad::compute) {
      dshort_ = conv.backward(bn.backward(dsum), block_input);
      report(ready, conv, bn);
    }
  }
  return dsum;
}

void ResidualJoin::finish_backward(const Tensor& dx) {
  if (!dshort_.defined()) throw BackendError(fmt::format("{}: finish_backward() without the shortcut's gradient", block_));
  backend_->add(dx, dx, dshort_);
}

void ResidualJoin::append_forward_buffers(std::vector<ForwardBuffer>& out) {
  if (!downsample_) return;
  out.push_back({ForwardSlot::temp_a, &downsample_->conv.output_buffer()});  // reads the block input
  out.push_back({ForwardSlot::temp_b, &downsample_->bn.output_buffer()});
}

void ResidualJoin::append_buffers(std::vector<ModelBuffer>& out) const {
  if (downsample_) out.insert(out.end(), downsample_->bn.buffers().begin(), downsample_->bn.buffers().end());
}

void ResidualJoin::append_gradient_buffers(std::vector<GradientBuffer>& out) {
  // begin_backward(): dsum (sum) from dy (the next block's input slot); the downsample's BN
  // writes ping from dsum, its conv writes shortcut from ping, which lives until
  // finish_backward(). The branch's first op then overwrites ping.
  out.push_back({GradSlot::sum, &dsum_});
  if (!downsample_) return;
  out.push_back({GradSlot::ping, &downsample_->bn.input_grad_buffer()});
  out.push_back({GradSlot::shortcut, &downsample_->conv.input_grad_buffer()});
  // Not a gradient: the downsample batch norm's output, dead once forward's add has read it (the
  // batch norm's backward reads its input, not its output). Gradient slots hold nothing while
  // forward runs, so it lives in the shortcut slot, which this block's backward fills only later,
  // and no full-size tensor is kept per downsample for it (ResNet-50 at batch 256: 736 MiB in
  // bf16, 1,470 in fp32).
  out.push_back({GradSlot::shortcut, &downsample_->bn.output_buffer()});
}

// ---- Bottleneck -----------------------------------------------------------------------------

Bottleneck::Bottleneck(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
                       std::int64_t planes, std::int64_t stride, GammaInit last_gamma)
    : store_(store),
      planes_(planes),
      conv1_(store, prefix + ".conv1", in_channels, planes, Window{1, 1, 0}, kConvInit),
      bn1_(store, prefix + ".bn1", planes),
      conv2_(store, prefix + ".conv2", planes, planes, Window{3, stride, 1}, kConvInit),  // v1.5: stride here
      bn2_(store, prefix + ".bn2", planes),
      conv3_(store, prefix + ".conv3", planes, planes * kExpansion, Window{1, 1, 0}, kConvInit),
      bn3_(store, prefix + ".bn3", planes * kExpansion, last_gamma) {
  if (stride != 1 || in_channels != planes * kExpansion) {
    join_.set_downsample(std::make_unique<Downsample>(store, prefix, in_channels, planes * kExpansion, stride));
  }
}

ImageShape Bottleneck::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  ImageShape s = conv1_.build(backend, max_batch, in, dtype);
  bn1_.build(backend, max_batch, s, dtype);
  relu1_.build(backend, max_batch, s, dtype);
  s = conv2_.build(backend, max_batch, s, dtype);
  bn2_.build(backend, max_batch, s, dtype);
  relu2_.build(backend, max_batch, s, dtype);
  s = conv3_.build(backend, max_batch, s, dtype);
  bn3_.build(backend, max_batch, s, dtype);
  join_.build(backend, max_batch, in, s, dtype);
  return s;
}

Tensor Bottleneck::forward(const Tensor& x, Mode mode) {
  Tensor h = relu1_.forward(bn1_.forward(conv1_.forward(x), mode));
  h = relu2_.forward(bn2_.forward(conv2_.forward(h), mode));
  h = bn3_.forward(conv3_.forward(h), mode);
  return join_.forward(x, h, mode);
}

Tensor Bottleneck::backward(const Tensor& dy, const GradReadyFn& ready, nn::InputGrad input_grad) {
  const BranchNeeds needs{store_, input_grad};
  if (!needs.below(join_.parameters_end(bn3_.bias_index() + 1))) return Tensor();  // all frozen
  const Tensor dsum = join_.begin_backward(dy, ready, input_grad, store_);
  Tensor d = unit_backward(dsum, conv3_, bn3_, nullptr, needs, ready);
  d = unit_backward(d, conv2_, bn2_, &relu2_, needs, ready);
  d = unit_backward(d, conv1_, bn1_, &relu1_, needs, ready);
  if (d.defined()) join_.finish_backward(d);  // defined exactly when input_grad is compute
  return d;
}

std::vector<GradientBuffer> Bottleneck::gradient_buffers() {
  // Backward order: each op reads the slot the one before wrote and writes the other of ping /
  // pong; conv1 writes the block's input gradient, to which finish_backward() adds the shortcut's
  // gradient (dsum, still intact, or the shortcut slot).
  std::vector<GradientBuffer> out;
  join_.append_gradient_buffers(out);
  out.insert(out.end(), {{GradSlot::ping, &bn3_.input_grad_buffer()},     // from dsum
                         {GradSlot::pong, &conv3_.input_grad_buffer()},   // from ping
                         {GradSlot::ping, &relu2_.input_grad_buffer()},   // from pong
                         {GradSlot::pong, &bn2_.input_grad_buffer()},     // from ping
                         {GradSlot::ping, &conv2_.input_grad_buffer()},   // from pong
                         {GradSlot::pong, &relu1_.input_grad_buffer()},   // from ping
                         {GradSlot::ping, &bn1_.input_grad_buffer()},     // from pong
                         {GradSlot::input, &conv1_.input_grad_buffer()}}); // from ping
  return out;
}

std::vector<ForwardBuffer> Bottleneck::forward_buffers(ForwardSlot output) {
  // Each op reads the slot the one before wrote (conv1 the block input, in the other output
  // slot) and writes the other temporary; the ReLUs work in place.
  std::vector<ForwardBuffer> out = {{ForwardSlot::temp_a, &conv1_.output_buffer()},
                                    {ForwardSlot::temp_b, &bn1_.output_buffer()},
                                    {ForwardSlot::temp_a, &conv2_.output_buffer()},
                                    {ForwardSlot::temp_b, &bn2_.output_buffer()},
                                    {ForwardSlot::temp_a, &conv3_.output_buffer()},
                                    {output, &bn3_.output_buffer()}};
  join_.append_forward_buffers(out);
  return out;
}

void Bottleneck::append_buffers(std::vector<ModelBuffer>& out) const {
  for (const BatchNorm2d* bn : {&bn1_, &bn2_, &bn3_}) out.insert(out.end(), bn->buffers().begin(), bn->buffers().end());
  join_.append_buffers(out);
}

// ---- BasicBlock -----------------------------------------------------------------------------

BasicBlock::BasicBlock(ParameterStore& store, const std::string& prefix, std::int64_t in_channels,
                       std::int64_t planes, std::int64_t stride, GammaInit last_gamma)
    : store_(store),
      planes_(planes),
      conv1_(store, prefix + ".conv1", in_channels, planes, Window{3, stride, 1}, kConvInit),
      bn1_(store, prefix + ".bn1", planes),
      conv2_(store, prefix + ".conv2", planes, planes, Window{3, 1, 1}, kConvInit),
      bn2_(store, prefix + ".bn2", planes, last_gamma) {
  if (stride != 1 || in_channels != planes) {
    join_.set_downsample(std::make_unique<Downsample>(store, prefix, in_channels, planes, stride));
  }
}

ImageShape BasicBlock::build(Backend& backend, std::int64_t max_batch, ImageShape in, DType dtype) {
  ImageShape s = conv1_.build(backend, max_batch, in, dtype);
  bn1_.build(backend, max_batch, s, dtype);
  relu1_.build(backend, max_batch, s, dtype);
  s = conv2_.build(backend, max_batch, s, dtype);
  bn2_.build(backend, max_batch, s, dtype);
  join_.build(backend, max_batch, in, s, dtype);
  return s;
}

Tensor BasicBlock::forward(const Tensor& x, Mode mode) {
  Tensor h = relu1_.forward(bn1_.forward(conv1_.forward(x), mode));
  h = bn2_.forward(conv2_.forward(h), mode);
  return join_.forward(x, h, mode);
}

Tensor BasicBlock::backward(const Tensor& dy, const GradReadyFn& ready, nn::InputGrad input_grad) {
  const BranchNeeds needs{store_, input_grad};
  if (!needs.below(join_.parameters_end(bn2_.bias_index() + 1))) return Tensor();  // all frozen
  const Tensor dsum = join_.begin_backward(dy, ready, input_grad, store_);
  Tensor d = unit_backward(dsum, conv2_, bn2_, nullptr, needs, ready);
  d = unit_backward(d, conv1_, bn1_, &relu1_, needs, ready);
  if (d.defined()) join_.finish_backward(d);
  return d;
}

std::vector<GradientBuffer> BasicBlock::gradient_buffers() {
  // As Bottleneck::gradient_buffers(), with one 3x3 conv + BN less in the branch.
  std::vector<GradientBuffer> out;
  join_.append_gradient_buffers(out);
  out.insert(out.end(), {{GradSlot::ping, &bn2_.input_grad_buffer()},     // from dsum
                         {GradSlot::pong, &conv2_.input_grad_buffer()},   // from ping
                         {GradSlot::ping, &relu1_.input_grad_buffer()},   // from pong
                         {GradSlot::pong, &bn1_.input_grad_buffer()},     // from ping
                         {GradSlot::input, &conv1_.input_grad_buffer()}}); // from pong
  return out;
}

std::vector<ForwardBuffer> BasicBlock::forward_buffers(ForwardSlot output) {
  // As Bottleneck::forward_buffers(), one conv + BN shorter.
  std::vector<ForwardBuffer> out = {{ForwardSlot::temp_a, &conv1_.output_buffer()},
                                    {ForwardSlot::temp_b, &bn1_.output_buffer()},
                                    {ForwardSlot::temp_a, &conv2_.output_buffer()},
                                    {output, &bn2_.output_buffer()}};
  join_.append_forward_buffers(out);
  return out;
}

void BasicBlock::append_buffers(std::vector<ModelBuffer>& out) const {
  for (const BatchNorm2d* bn : {&bn1_, &bn2_}) out.insert(out.end(), bn->buffers().begin(), bn->buffers().end());
  join_.append_buffers(out);
}

}  // namespace kiln::resnet
