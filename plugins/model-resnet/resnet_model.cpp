// ResnetModel: stem (7x7/2 conv, BN, ReLU, 3x3/2 max-pool) -> 4 stages of residual blocks
// (the first block of stages 2-4 has stride 2) -> global average pool -> Linear.
//
// Everything is in the compute dtype: the trainer casts a floating input in, the logits out and
// the dlogits back in (kiln/model.hpp). With input = "u8" the trainer passes the bytes through and
// forward() starts with Backend::normalize_image into a compute-dtype buffer tagged with the
// backend's activation_layout(); floating input is reordered into such a buffer (convert_layout)
// when that layout is not NCHW, so the stem convolution always runs channels-last there.
// The stem conv skips its input gradient (nobody needs d(images)). backward() reports each
// parameter ready as soon as its layer's backward has run, fc first, conv1 last, so GradSync can
// reduce the late stages while the early ones are still computing. With frozen parameters
// ([model] freeze, ModelBuildContext::frozen) backward stops where no parameter before a layer
// trains: under a frozen backbone only fc runs, and a frozen layer skips its weight gradient.
#include "resnet_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <kiln/errors.hpp>
#include <kiln/sdk/log.hpp>

namespace kiln::resnet {

Architecture architecture_for(std::int64_t depth, const std::string& where) {
  using B = Architecture::Block;
  switch (depth) {
    case 18: return Architecture{B::basic, {2, 2, 2, 2}};
    case 34: return Architecture{B::basic, {3, 4, 6, 3}};
    case 50: return Architecture{B::bottleneck, {3, 4, 6, 3}};
    case 101: return Architecture{B::bottleneck, {3, 4, 23, 3}};
    case 152: return Architecture{B::bottleneck, {3, 8, 36, 3}};
    default:
      throw ConfigError(fmt::format("{} = {} is not a ResNet depth; use 18, 34, 50, 101 or 152", where, depth));
  }
}

namespace {

/// Three floats (one per RGB channel) from a float-list parameter; the schema's ranges made them
/// finite (and > 0 for std), the count is checked here.
void read_rgb(const ParamMap& p, const char* key, float (&out)[3]) {
  const auto& v = p.get<std::vector<double>>(key);
  if (v.size() != 3) {
    throw ConfigError(fmt::format("{} has {} values; give one per RGB channel (3)", p.where(key), v.size()));
  }
  for (std::size_t i = 0; i < 3; ++i) out[i] = static_cast<float>(v[i]);
}

}  // namespace

std::int64_t scaled_width(std::int64_t base, double width) {
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(base) * width));
}

ResnetModel::ResnetModel(const PluginArgs& args) {
  if (!args.params) throw ConfigError("resnet: created without a parameter table");
  const ParamMap& p = *args.params;
  depth_ = p.get_int("depth");
  classes_ = p.get_int("num_classes");
  width_ = p.get_float("width");
  in_channels_ = p.get_int("in_channels");
  image_size_ = p.get_int("image_size");
  const bool zero_init = p.get_bool("zero_init_residual");
  const std::string& input = p.get_string("input");
  if (input == "f32") {
    input_kind_ = InputKind::f32;
  } else if (input == "u8") {
    input_kind_ = InputKind::u8;
  } else {
    throw ConfigError(fmt::format("{} = \"{}\" is not an input kind; use \"f32\" (normalised (C, H, W) "
                                  "images) or \"u8\" (raw (H, W, 3) bytes, normalised by the model)",
                                  p.where("input"), input));
  }
  read_rgb(p, "mean", normalize_.mean);
  read_rgb(p, "std", normalize_.std);
  const Architecture arch = architecture_for(depth_, p.where("depth"));
  // num_classes >= 2, width in (0, 64], in_channels >= 1, image_size >= 32, std > 0 and every
  // float finite: the schema's ranges (plugin.cpp), checked by the core before this runs.
  if (input_kind_ == InputKind::u8 && in_channels_ != 3) {
    throw ConfigError(fmt::format("{} = {} but {} = \"u8\" takes RGB (H, W, 3) bytes; set in_channels = 3",
                                  p.where("in_channels"), in_channels_, p.where("input")));
  }

  const nn::GammaInit last_gamma = zero_init ? nn::GammaInit::zeros : nn::GammaInit::ones;
  const std::int64_t stem = scaled_width(64, width_);
  conv1_ = std::make_unique<nn::Conv2d>(store_, "conv1", in_channels_, stem, nn::Window{7, 2, 3},
                                        kConvInit, nn::ConvBias::none, nn::InputGrad::skip);
  bn1_ = std::make_unique<nn::BatchNorm2d>(store_, "bn1", stem);
  std::int64_t channels = stem;
  const std::int64_t base[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t planes = scaled_width(base[stage], width_);
    for (std::int64_t j = 0; j < arch.blocks[stage]; ++j) {
      const std::int64_t stride = (stage > 0 && j == 0) ? 2 : 1;
      const std::string prefix = fmt::format("layer{}.{}", stage + 1, j);
      if (arch.block == Architecture::Block::bottleneck) {
        blocks_.push_back(std::make_unique<Bottleneck>(store_, prefix, channels, planes, stride, last_gamma));
      } else {
        blocks_.push_back(std::make_unique<BasicBlock>(store_, prefix, channels, planes, stride, last_gamma));
      }
      channels = blocks_.back()->out_channels();
      block_stage_.push_back(static_cast<std::size_t>(stage));
    }
  }
  fc_ = std::make_unique<nn::Linear>(store_, "fc", channels, classes_);
}

InputSpec ResnetModel::input_spec() const {
  if (input_kind_ == InputKind::u8) return InputSpec{{image_size_, image_size_, 3}, DType::u8, classes_};
  return InputSpec{{in_channels_, image_size_, image_size_}, DType::f32, classes_};
}

void ResnetModel::build(const ModelBuildContext& ctx) {
  if (backend_ != nullptr) throw BackendError("resnet: build() called twice");
  if (ctx.backend == nullptr || ctx.max_batch < 1) {
    throw BackendError("resnet: build() needs a backend and max_batch >= 1");
  }
  Backend& backend = *ctx.backend;
  const std::int64_t n = ctx.max_batch;
  const DType dt = ctx.compute_dtype;
  if (input_kind_ == InputKind::u8) nn::require_op(backend, Op::normalize_image, dt, "resnet (input = \"u8\")");
  store_.allocate(backend, ctx.param_dtype, dt, ctx.seed);
  store_.set_frozen(ctx);  // [model] freeze and frozen_bn: every layer built below
  store_.set_batch_norm_sync(ctx.batch_norm_sync);  // [model] sync_bn: every BatchNorm2d built below

  const nn::ImageShape s = build_layers(backend, n, dt);
  avgpool_.build(backend, n, s, dt);
  fc_->build(backend, n, dt);

  buffers_.clear();
  buffers_.insert(buffers_.end(), bn1_->buffers().begin(), bn1_->buffers().end());
  for (const auto& block : blocks_) block->append_buffers(buffers_);

  compute_dtype_ = dt;
  if (input_kind_ == InputKind::u8) {
    // The stem conv accepts either layout; the activation layout spares it a reorder.
    x_compute_ = backend.allocate({n, 3, image_size_, image_size_}, dt, MemoryKind::device)
                     .with_layout(backend.activation_layout(dt));
  } else if (backend.activation_layout(dt) != Layout::row_major) {
    // Floating input arrives NCHW. Reordering its few channels here lets the stem run in the
    // activation layout; left NCHW, the cuda stem would run NCHW and reorder its 64-channel output
    // every forward and that output's gradient every backward (the cpu backend reorders the
    // input at its primitive's edge either way, so its results do not change).
    nn::require_op(backend, Op::convert_layout, dt, "resnet (stem input in the activation layout)");
    x_compute_ = backend.allocate({n, in_channels_, image_size_, image_size_}, dt, MemoryKind::device)
                     .with_layout(backend.activation_layout(dt));
  }
  backend_ = &backend;
}

nn::ImageShape ResnetModel::build_layers(Backend& backend, std::int64_t n, DType dt) {
  // Device memory (shared_buffers.hpp). Buffers are taken from their layers as each block is
  // built, so the build never holds them all at once and their final home besides.
  // - Each stage's forward outputs (what its blocks keep for backward) are packed into one
  //   allocation (StageArena).
  // - Activation gradients: a stage's blocks run backward one after another, so one set of slots
  //   (GradSlot) serves all of them. Each stage's set lives in the next stage's arena, whose
  //   outputs are dead once that stage's backward has run, i.e. before this stage's starts; the
  //   last stage's set, and slots that do not fit, are allocated. The stem's gradients join the
  //   first stage's set: maxpool's backward reads the first block's input slot into its own
  //   buffer, the ReLU writes ping from it, the batch norm the sum slot (dead once the blocks are
  //   done; pong is smaller than the stem's gradient) from ping; conv1 has no input gradient.
  // - With a frozen prefix (the stem and the blocks no backward reaches, which keep nothing for
  //   backward) the prefix's outputs share four buffers (ForwardSlot) instead, and one set of
  //   gradient slots, allocated, serves every stage. The prefix's last output, which the first
  //   trained layer's backward reads, is left alone by everything after it.
  const std::optional<std::size_t> prefix = frozen_prefix_length();
  const std::size_t stages = prefix ? 1 : block_stage_.back() + 1;
  std::vector<SharedSlots> gradients;
  std::vector<StageArena> arenas;
  for (std::size_t stage = 0; stage < stages; ++stage) {
    gradients.emplace_back(kGradSlots, fmt::format("resnet: activation gradients of layer{}", stage + 1));
    arenas.emplace_back(fmt::format("resnet: forward outputs of layer{}", stage + 1));
  }
  SharedSlots prefix_outputs(kForwardSlots, "resnet: frozen-prefix outputs");

  nn::ImageShape s = conv1_->build(backend, n, nn::ImageShape{in_channels_, image_size_, image_size_}, dt);
  bn1_->build(backend, n, s, dt);
  relu_.build(backend, n, s, dt);
  s = maxpool_.build(backend, n, s, dt);
  gradients[0].take(static_cast<std::size_t>(GradSlot::ping), relu_.input_grad_buffer());
  gradients[0].take(static_cast<std::size_t>(GradSlot::sum), bn1_->input_grad_buffer());
  if (prefix) {
    prefix_outputs.take_all(std::vector<ForwardBuffer>{{ForwardSlot::temp_a, &conv1_->output_buffer()},
                                                       {ForwardSlot::temp_b, &bn1_->output_buffer()},
                                                       {ForwardSlot::out_odd, &maxpool_.output_buffer()}});
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    s = blocks_[i]->build(backend, n, s, dt);
    // Gradients first: the downsample batch norm's output is listed in both, and it belongs in
    // the gradient set (GradSlot::shortcut); the arena then skips it.
    gradients[prefix ? 0 : block_stage_[i]].take_all(blocks_[i]->gradient_buffers());
    if (!prefix) {
      arenas[block_stage_[i]].take_all(blocks_[i]->forward_buffers(ForwardSlot::out_even));  // the slots are unused
    } else if (i < *prefix) {
      prefix_outputs.take_all(blocks_[i]->forward_buffers(i % 2 == 0 ? ForwardSlot::out_even : ForwardSlot::out_odd));
    }
  }
  for (StageArena& arena : arenas) arena.bind(backend);
  for (std::size_t stage = 0; stage < stages; ++stage) {
    gradients[stage].bind(backend, stage + 1 < stages ? arenas[stage + 1].spare() : SpareMemory{});
  }
  if (prefix) {
    const SharedBytes bytes = prefix_outputs.bind(backend);
    frozen_prefix_blocks_ = *prefix;
    log::get("resnet")->info("frozen prefix: the stem and {} of {} blocks run forward only; their outputs share 4 "
                             "buffers, {:.1f} MB instead of {:.1f} MB",
                             frozen_prefix_blocks_, blocks_.size(), static_cast<double>(bytes.shared) / 1e6,
                             static_cast<double>(bytes.apart) / 1e6);
  }
  return s;
}

std::optional<std::size_t> ResnetModel::frozen_prefix_length() const {
  // ParameterStore::trains_before: nothing in them or before them trains ([model] freeze).
  if (store_.trains_before(blocks_.front()->first_parameter())) return std::nullopt;  // the stem trains
  std::size_t i = 0;
  for (; i < blocks_.size(); ++i) {
    const std::size_t end = i + 1 < blocks_.size() ? blocks_[i + 1]->first_parameter() : fc_->weight_index();
    if (store_.trains_before(end)) break;
  }
  return i;
}

Tensor ResnetModel::forward(const Tensor& x, Mode mode, std::uint64_t /*step_seed: no dropout*/) {
  if (backend_ == nullptr) throw BackendError("resnet: forward() before build()");
  const std::int64_t b = x.dim(0);
  if (input_kind_ == InputKind::u8) {
    const Shape want{b, image_size_, image_size_, 3};
    if (x.dtype() != DType::u8 || x.numel() != shape_numel(want)) {
      throw BackendError(fmt::format("resnet: input {} is not {} u8 images of {}x{}x3 (model.input = \"u8\"); "
                                     "give the data source output = \"u8\" and model.image_size its size",
                                     x.describe(), b, image_size_, image_size_));
    }
    rows_ = b;
    Tensor h = x_compute_.rows(0, b);
    backend_->normalize_image(h, x.reshape(want), normalize_);
    return run_network(h, mode);
  }
  const Shape want{b, in_channels_, image_size_, image_size_};
  if (x.dtype() != compute_dtype_ || x.numel() != shape_numel(want)) {
    throw BackendError(fmt::format("resnet: input {} does not hold {} {} images of {}x{}x{}; set "
                                   "model.in_channels / model.image_size to the data's sample shape "
                                   "(model.input = \"u8\" for byte images)",
                                   x.describe(), b, dtype_name(compute_dtype_), in_channels_, image_size_,
                                   image_size_));
  }
  rows_ = b;
  if (!x_compute_.defined()) return run_network(x.reshape(want), mode);
  Tensor h = x_compute_.rows(0, b);
  backend_->convert_layout(h, x.reshape(want));
  return run_network(h, mode);
}

Tensor ResnetModel::run_network(Tensor h, Mode mode) {
  h = maxpool_.forward(relu_.forward(bn1_->forward(conv1_->forward(h), mode)));
  for (auto& block : blocks_) h = block->forward(h, mode);
  return fc_->forward(avgpool_.forward(h));
}

void ResnetModel::backward(const Tensor& dlogits, const GradReadyFn& ready) {
  if (rows_ == 0) throw BackendError("resnet: backward() before forward()");
  if (dlogits.rank() != 2 || dlogits.dim(0) != rows_ || dlogits.dim(1) != classes_) {
    throw BackendError(fmt::format("resnet: dlogits is {}, expected ({}, {}) from the last forward",
                                   dlogits.describe(), rows_, classes_));
  }
  // Parameters are declared in forward order, so a layer's input gradient is needed only when a
  // parameter declared before it trains (ParameterStore::trains_before); each part returns an
  // undefined gradient where that is not so, and the parts below it do not run.
  Tensor d = fc_->backward(dlogits, store_.trains_before(fc_->weight_index()) ? nn::InputGrad::compute
                                                                                : nn::InputGrad::skip);
  if (ready) {
    ready(fc_->weight_index());
    ready(fc_->bias_index());
  }
  if (d.defined()) d = avgpool_.backward(d);
  for (std::size_t i = blocks_.size(); i-- > 0 && d.defined();) {
    ResidualBlock& block = *blocks_[i];
    d = block.backward(d, ready, store_.trains_before(block.first_parameter()) ? nn::InputGrad::compute
                                                                               : nn::InputGrad::skip);
  }
  if (!d.defined()) return;  // the stem is frozen
  d = bn1_->backward(relu_.backward(maxpool_.backward(d)));
  conv1_->backward(d);
  if (ready) {
    ready(bn1_->weight_index());
    ready(bn1_->bias_index());
    ready(conv1_->weight_index());
  }
}

}  // namespace kiln::resnet
