// Checks shared by CNN layers (the SDK's and a model plugin's own blocks): that an activation is the
// (B, C, H, W) a layer was built for, that a gradient follows its forward, that build() ran.
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "kiln/errors.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"

namespace kiln::nn::detail {

/// Throws BackendError unless t is (B, in.c, in.h, in.w) with 1 <= B <= max_batch, naming the layer.
inline void check_image(const Tensor& t, ImageShape in, std::int64_t max_batch, const char* layer,
                        const std::string& prefix, const char* what) {
  const bool ok = t.rank() == 4 && t.dim(1) == in.c && t.dim(2) == in.h && t.dim(3) == in.w &&
                  t.dim(0) >= 1 && t.dim(0) <= max_batch;
  if (!ok) {
    throw BackendError(fmt::format("{} '{}': {} is {}, expected (B, {}, {}, {}) with 1 <= B <= {}; "
                                   "build the layer for this shape",
                                   layer, prefix, what, t.describe(), in.c, in.h, in.w, max_batch));
  }
}

/// Throws BackendError unless dy has the batch of the forward it follows (its plan is per batch).
inline void check_same_batch(const Tensor& dy, const Tensor& x_saved, const char* layer, const std::string& prefix) {
  if (dy.rank() < 1 || dy.dim(0) != x_saved.dim(0)) {
    throw BackendError(fmt::format("{} '{}': output gradient {} does not have the {} rows of the last forward; "
                                   "call backward() with the gradient of that forward",
                                   layer, prefix, dy.describe(), x_saved.dim(0)));
  }
}

/// Throws BackendError when forward()/backward() run before build().
inline void check_built(const Backend* backend, const char* layer, const std::string& prefix) {
  if (backend == nullptr) {
    throw BackendError(fmt::format("{} '{}' used before build(); call build() once first", layer, prefix));
  }
}

}  // namespace kiln::nn::detail
