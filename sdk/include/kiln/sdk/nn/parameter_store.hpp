// ParameterStore: the flat parameter and gradient arenas a model's layers live in.
//
// Layers declare their parameters (name, shape, initialiser, flags) while the model is being
// constructed; allocate() then makes ONE value arena, ONE gradient arena (and a compute-dtype
// arena when it differs from the master dtype) and hands every parameter a view into each
// (llm.c's sizes table). Each parameter starts on a 64-byte boundary; the gaps are zero and stay
// zero through every optimizer, so a contiguous range of parameters can be updated or
// all-reduced as one slice. Initial values are drawn on the host from (seed, parameter name), so
// they do not depend on declaration order or thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/model.hpp"

namespace kiln::nn {

/// How a parameter is initialised.
struct Init {
  enum class Kind : std::uint8_t { zeros, ones, uniform, normal } kind = Kind::zeros;
  float a = 0;  ///< uniform: low bound;  normal: mean
  float b = 0;  ///< uniform: high bound; normal: standard deviation
  static Init zeros() { return {Kind::zeros, 0, 0}; }
  static Init ones() { return {Kind::ones, 0, 0}; }
  static Init uniform(float lo, float hi) { return {Kind::uniform, lo, hi}; }
  static Init normal(float mean, float stddev) { return {Kind::normal, mean, stddev}; }
};

class ParameterStore {
 public:
  /// Declares a parameter; returns its index in parameters(). Only before allocate().
  /// Throws ConfigError for a duplicate name.
  std::size_t declare(std::string name, Shape shape, Init init, std::uint32_t flags = kParamNone);
  /// Allocates the arenas on `backend`, initialises values on the host and copies them in,
  /// zeroes the gradients, and fills compute copies. Throws BackendError on allocation failure.
  void allocate(Backend& backend, DType param_dtype, DType compute_dtype, std::uint64_t seed);
  bool allocated() const noexcept { return value_arena_.defined(); }

  std::span<const Parameter> parameters() const noexcept { return params_; }
  /// Shape parameter i was declared with (valid before allocate(), unlike its tensors).
  const Shape& declared_shape(std::size_t i) const { return shapes_pending_.at(i); }
  const Parameter& operator[](std::size_t i) const { return params_.at(i); }
  /// Element offset of parameter i in the arenas, and the arena size in elements.
  std::int64_t offset(std::size_t i) const { return offsets_.at(i); }
  std::int64_t arena_elements() const noexcept { return arena_elements_; }

  const Tensor& value_arena() const noexcept { return value_arena_; }
  const Tensor& grad_arena() const noexcept { return grad_arena_; }
  /// Sets every gradient (and the gaps) to zero with one fill.
  void zero_grads(Backend& backend) const;

  /// Marks every declared parameter that `frozen` (ModelBuildContext::frozen) names with
  /// kParamFrozen; an empty function marks none. A model calls it from build(), after its layers
  /// declared their parameters. From then on the SDK layers skip the weight gradients of frozen
  /// parameters (which the run never reads), and the model asks trains_before() where its
  /// backward may stop.
  void set_frozen(const std::function<bool(std::string_view)>& frozen);
  /// Everything the context says about frozen parameters: set_frozen(ctx.frozen), and the mode
  /// (ctx.frozen_bn) that every BatchNorm2d built afterwards runs in when its weight and bias are
  /// both frozen.
  void set_frozen(const ModelBuildContext& ctx);
  Mode frozen_bn() const noexcept { return frozen_bn_; }
  bool frozen(std::size_t i) const { return (params_.at(i).flags & kParamFrozen) != 0; }
  /// Whether some parameter declared before index `i` trains. A model whose parameters are
  /// declared in the order its forward pass uses them (every model built from these layers is)
  /// needs the input gradient of a layer whose first parameter is `i` only then: nothing before
  /// that layer would read it.
  bool trains_before(std::size_t i) const noexcept { return first_trainable_ < i; }

  /// Synchronised batch-norm for the model whose layers share this store: a model sets it from
  /// ModelBuildContext::batch_norm_sync before building its layers, and every BatchNorm2d built
  /// afterwards synchronises through it (null, the default: none does).
  void set_batch_norm_sync(BatchNormSync* sync) noexcept { batch_norm_sync_ = sync; }
  BatchNormSync* batch_norm_sync() const noexcept { return batch_norm_sync_; }

 private:
  struct Declared {
    Init init;
  };
  std::vector<Parameter> params_;
  std::vector<Declared> declared_;
  std::vector<Shape> shapes_pending_;
  std::vector<std::int64_t> offsets_;
  std::int64_t arena_elements_ = 0;
  std::size_t first_trainable_ = 0;  // index of the first parameter not frozen (every one trains until set_frozen)
  Tensor value_arena_, compute_arena_, grad_arena_;
  BatchNormSync* batch_norm_sync_ = nullptr;
  Mode frozen_bn_ = Mode::train;
};

}  // namespace kiln::nn
