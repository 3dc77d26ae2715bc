// ResnetModel: the `resnet` model plugin, torchvision's ResNet v1.5 (stride on the 3x3 conv of
// a Bottleneck) at depth 18/34/50/101/152, built from the core CNN layers.
//
// Decisions: parameter and buffer names are torchvision's state_dict names, so checkpoints map
// one to one ("layer1.0.downsample.0.weight"); `width` scales every stage's base width (64, 128,
// 256, 512) and is rounded to the nearest integer (at least 1), so width 1.0 is torchvision's
// network exactly. Input and logits are in the compute dtype (the trainer casts, kiln/model.hpp).
// The input is either normalised floating (C, H, W) images, which the trainer delivers in the
// compute dtype, or, with input = "u8", raw (H, W, 3) bytes that Backend::normalize_image turns
// into the compute dtype, written straight into the backend's activation layout so the stem conv
// reads it without a reorder.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <kiln/sdk/nn/cnn_layers.hpp>

#include "blocks.hpp"
#include <kiln/sdk/nn/layers.hpp>
#include <kiln/sdk/nn/parameter_store.hpp>
#include <kiln/ops.hpp>
#include <kiln/plugin_args.hpp>

namespace kiln::resnet {

/// Blocks per stage and block kind for a supported depth.
struct Architecture {
  enum class Block : std::uint8_t { basic, bottleneck } block = Block::bottleneck;
  std::int64_t blocks[4] = {3, 4, 6, 3};
};

/// What the model takes as input: normalised floating (C, H, W) (the data source's f32, cast to
/// the compute dtype by the trainer), or raw u8 (H, W, 3) it normalises itself.
enum class InputKind : std::uint8_t { f32, u8 };

/// The architecture of `depth`; throws ConfigError (naming `where`) for other depths.
Architecture architecture_for(std::int64_t depth, const std::string& where);

/// round(base * width), at least 1.
std::int64_t scaled_width(std::int64_t base, double width);

class ResnetModel final : public Model {
 public:
  /// Reads depth, num_classes, width, zero_init_residual, in_channels, image_size, input,
  /// mean, std. Throws ConfigError for out-of-range values.
  explicit ResnetModel(const PluginArgs& args);

  std::string_view name() const override { return "resnet"; }
  InputSpec input_spec() const override;
  void build(const ModelBuildContext& ctx) override;
  std::span<const Parameter> parameters() const override { return store_.parameters(); }
  std::span<const ModelBuffer> buffers() const override { return buffers_; }
  Tensor forward(const Tensor& x, Mode mode, std::uint64_t step_seed) override;
  void backward(const Tensor& dlogits, const GradReadyFn& ready) override;

  /// The declared parameters (names, shapes, flags) before build(), for tests and tools.
  const nn::ParameterStore& store() const noexcept { return store_; }
  InputKind input_kind() const noexcept { return input_kind_; }
  /// How many blocks (after the stem) share forward buffers as a frozen prefix; 0 when the stem
  /// trains (valid after build()).
  std::size_t frozen_prefix_blocks() const noexcept { return frozen_prefix_blocks_; }
  const ImageNormalize& normalization() const noexcept { return normalize_; }

 private:
  /// Stem to logits (compute dtype) for `h`, the input in the compute dtype (N, C, H, W).
  Tensor run_network(Tensor h, Mode mode);
  /// Builds the stem and the blocks and lays out their device memory; returns the last block's
  /// output shape.
  nn::ImageShape build_layers(Backend& backend, std::int64_t max_batch, DType dtype);
  /// How many blocks after the stem no backward reaches (their outputs share forward buffers,
  /// with the stem's); nullopt when the stem trains. Valid once the store knows what is frozen.
  std::optional<std::size_t> frozen_prefix_length() const;

  std::int64_t depth_, classes_, in_channels_, image_size_;
  double width_;
  InputKind input_kind_ = InputKind::f32;
  ImageNormalize normalize_;  // used only for InputKind::u8
  nn::ParameterStore store_;
  std::unique_ptr<nn::Conv2d> conv1_;
  std::unique_ptr<nn::BatchNorm2d> bn1_;
  nn::ReluInPlace relu_;
  nn::MaxPool2d maxpool_{nn::Window{3, 2, 1}};
  std::vector<std::unique_ptr<ResidualBlock>> blocks_;
  std::vector<std::size_t> block_stage_;  // per block: its stage, 0 for layer1 to 3 for layer4
  nn::GlobalAvgPool avgpool_;
  std::unique_ptr<nn::Linear> fc_;
  std::vector<ModelBuffer> buffers_;

  Backend* backend_ = nullptr;
  DType compute_dtype_ = DType::f32;
  // The stem's input in the activation layout: the normalised image (input = "u8"), or the
  // reordered floating input where the activation layout is not NCHW; undefined otherwise.
  Tensor x_compute_;
  std::int64_t rows_ = 0;
  std::size_t frozen_prefix_blocks_ = 0;
};

}  // namespace kiln::resnet
