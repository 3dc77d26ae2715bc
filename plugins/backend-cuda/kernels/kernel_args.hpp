// Plain argument structs the kernel launchers take beyond pointers and counts, kept free of CUDA
// headers so the argument checks that produce them (ops/kernel_validate.hpp) build and are
// tested without the toolkit.
#pragma once

#include <cstdint>

#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// Logical (N, C, H, W) sizes of an image tensor, hw = H * W, and how it sits in memory.
struct ImageGeometry {
  std::int64_t n = 0, c = 0, hw = 0;
  Layout layout = Layout::row_major;  ///< row_major (NCHW) or nhwc
};

/// Per-channel y = x * scale[c] + shift[c] of normalize_image.
struct ChannelAffine {
  float scale[3] = {1, 1, 1};
  float shift[3] = {0, 0, 0};
};

/// Rows and classes of a softmax cross-entropy call.
struct RowsClasses {
  std::int64_t rows = 0, classes = 0;
};

}  // namespace kiln::cuda::kernels
