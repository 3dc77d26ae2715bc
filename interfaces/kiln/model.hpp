// Model: a network built from core nn layers against a Backend (plugins `mlp`, `resnet`).
//
// Forward and backward are written by hand, llm.c/Caffe style (no tape). The parameter list is
// static and ordered: it is fixed by build(), never changes afterwards, and is what GradSync
// buckets, optimizers update and checkpoints save. Parameters and gradients each live in one
// flat arena (core kiln::nn::ParameterStore) so a bucket is a contiguous slice.
//
// Lifecycle: construct (factory, parameters validated) -> input_spec() (before build, so the
// wiring can reject a data source of the wrong shape) -> build() once -> forward/backward per
// step. Not thread-safe: one trainer thread calls everything.
//
// Dtypes: a model sees tensors in the compute dtype (ModelBuildContext::compute_dtype, the
// PrecisionPolicy's) only, and never casts at its edges. The trainer casts a floating batch into
// the compute dtype before forward(), casts the returned logits to f32 for the loss, and casts the
// f32 loss gradient down to the compute dtype before backward(). Under fp32 nothing is cast.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/tensor.hpp"

namespace kiln {

class Backend;

/// What one sample must look like for this model. The run refuses a data source whose samples
/// differ (dtype, or shape unless sample_shape is 1-D with the same element count).
struct InputSpec {
  Shape sample_shape;  ///< per sample, without the batch dimension: {784}, {3, 224, 224}
  /// What the data source must produce. f32 means floating input, which forward() receives in
  /// the compute dtype (the trainer casts it); an integer dtype (u8 image bytes) reaches
  /// forward() unchanged, for the model to convert on the device.
  DType dtype = DType::f32;
  std::int64_t num_classes = 0;
};

/// Flags that change how the optimizer treats a parameter.
enum ParamFlags : std::uint32_t {
  kParamNone = 0,
  kParamNoWeightDecay = 1u << 0,  ///< biases, batch-norm gamma/beta
  /// Set by a model that read ModelBuildContext::frozen, on each parameter it named: the model
  /// knows the run never updates it and may leave its gradient unwritten. The core reads it only
  /// to report whether the model saves backward work on a frozen parameter.
  kParamFrozen = 1u << 1,
};

/// One trainable parameter. `value` is the master copy (param dtype, f32), `compute` the copy the
/// layers read (same tensor as value under fp32; refreshed by the PrecisionPolicy otherwise),
/// `grad` the gradient in the master dtype. All three are views into flat arenas.
struct Parameter {
  std::string name;  ///< PyTorch-style dotted name: "layers.0.weight"
  Tensor value;
  Tensor compute;
  Tensor grad;
  std::uint32_t flags = kParamNone;
};

/// Flags of a model buffer.
enum BufferFlags : std::uint32_t {
  kBufferNone = 0,
  /// Set by a model that honours ModelBuildContext::frozen_bn = Mode::eval, on the running
  /// statistics of each batch-norm layer that then normalises with them in training: training
  /// never writes the buffer. The core refuses [model] frozen_bn = "eval" when no buffer has it.
  kBufferFrozen = 1u << 0,
};

/// A non-trainable tensor that is part of the model state (batch-norm running statistics).
struct ModelBuffer {
  std::string name;
  Tensor value;
  std::uint32_t flags = kBufferNone;
};

enum class Mode : std::uint8_t { train = 0, eval = 1 };

/// Cross-rank sums for synchronised batch-norm ([model] sync_bn = true), provided by the core.
/// A training-mode batch-norm layer that has one sums its per-channel statistics (forward) and
/// gradient sums (backward) over every rank's batch, so the step equals one rank running the
/// global batch (PyTorch's SyncBatchNorm). Eval mode never calls it (running statistics).
class BatchNormSync {
 public:
  virtual ~BatchNormSync();
  /// Called once per synchronised layer from build(), with its name ("layer1.0.bn1"); the core
  /// reports the count and refuses sync_bn on a model that attached none.
  virtual void attach(std::string_view layer) = 0;
  /// Replaces `values` with their element-wise sum over all ranks. Every rank calls it with the
  /// same length in the same order (the layers' order); blocks until the sums are here.
  virtual void all_reduce_sum(std::span<double> values) = 0;
};

/// What build() gets.
struct ModelBuildContext {
  Backend* backend = nullptr;      ///< lives longer than the model
  DType param_dtype = DType::f32;  ///< master weights
  DType compute_dtype = DType::f32;
  std::int64_t max_batch = 0;      ///< forward() never sees more rows; activations are sized once
  std::uint64_t seed = 0;          ///< for parameter initialisation (rank 0's values win anyway)
  /// Non-null when [model] sync_bn = true: batch-norm layers synchronise through it (lives
  /// longer than the model). Null: each rank normalises with its own batch's statistics.
  BatchNormSync* batch_norm_sync = nullptr;
  /// Non-empty when [model] freeze is set: true for the name of a parameter the run never
  /// updates. Called during build() only. A model may ignore it (the trainer zeroes a frozen
  /// parameter's gradient after backward whatever the model wrote there); one that reads it may
  /// skip computing the gradients of frozen parameters and stop back-propagating where no
  /// parameter before a layer trains, and marks the parameters it was told about kParamFrozen.
  /// The trainable parameters' gradients must stay exactly what they would be without it.
  std::function<bool(std::string_view parameter)> frozen;
  /// With frozen: how a batch-norm layer whose weight and bias are both frozen runs in training
  /// ([model] frozen_bn). Mode::train, the default: as any other, with the batch's statistics,
  /// updating its running ones (PyTorch's requires_grad_(False) without .eval()). Mode::eval: with
  /// its running statistics, which training then never writes, and backward through that fixed
  /// affine map, dx = dy * gamma / sqrt(running_var + eps) (Keras's trainable = False,
  /// torchvision's FrozenBatchNorm2d); the model marks those statistics kBufferFrozen. Unlike
  /// frozen, this changes what training computes, so a model may not ignore it silently: the core
  /// refuses Mode::eval when no buffer is marked.
  Mode frozen_bn = Mode::train;
};

/// Called by backward() with the index (into parameters()) of each parameter whose gradient is
/// complete, in the order they complete (reverse layer order). GradSync launches a bucket's
/// all-reduce as soon as all its parameters are reported. A frozen parameter
/// (ModelBuildContext::frozen) need not be reported.
using GradReadyFn = std::function<void(std::size_t param_index)>;

class Model {
 public:
  virtual ~Model();

  /// Plugin name ("mlp").
  virtual std::string_view name() const = 0;
  /// The per-sample input this model expects. Valid right after construction.
  virtual InputSpec input_spec() const = 0;
  /// Declares and allocates parameters, initialises them, sizes activations for max_batch.
  /// Throws UnsupportedError if the backend lacks an op the model needs, ConfigError for
  /// inconsistent parameters.
  virtual void build(const ModelBuildContext& ctx) = 0;
  /// The static, ordered parameter list (valid after build()).
  virtual std::span<const Parameter> parameters() const = 0;
  /// Model buffers (BN running stats); empty by default.
  virtual std::span<const ModelBuffer> buffers() const;
  /// Logits (B, num_classes) in the compute dtype for input x (B, sample_shape...) with
  /// B <= max_batch; x is in the compute dtype when input_spec().dtype is floating, else in that
  /// integer dtype. The data source's shape may stand for a 1-D sample_shape of the same element
  /// count ((B, 1, 28, 28) for {784}), so reshape rather than assume. The returned tensor is owned
  /// by the model and valid until the next forward().
  /// `step_seed` drives dropout (same on every rank only if the caller makes it so).
  virtual Tensor forward(const Tensor& x, Mode mode, std::uint64_t step_seed) = 0;
  /// Back-propagates dlogits (B, num_classes), in the compute dtype, through the last
  /// forward(Mode::train), accumulating (`+=`) into every parameter's grad (master dtype) and
  /// calling ready() per parameter (a frozen one's gradient and report may be left out, see
  /// ModelBuildContext::frozen).
  virtual void backward(const Tensor& dlogits, const GradReadyFn& ready) = 0;
};

}  // namespace kiln
