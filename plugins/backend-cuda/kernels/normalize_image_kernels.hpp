// Launcher of the image normalisation kernel (normalize_image_kernels.cu): u8 (N, H, W, 3) images
// from the DataLoader become (N, 3, H, W) activations in the compute dtype, NCHW or channels-last
// as the destination's layout says. Per channel y = x * scale[c] + shift[c] with
// scale = 1 / (255 std), shift = -mean / std (the cpu backend's form). Conventions as
// activation_kernels.hpp.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/kernel_args.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// dst (n, 3, h, w) in `dst_layout` (row_major or nhwc) from src (n, h, w, 3) u8.
void normalize_image(void* dst, Layout dst_layout, const std::uint8_t* src, std::int64_t n,
                     std::int64_t h, std::int64_t w, const ChannelAffine& affine, DType dtype,
                     cudaStream_t stream);

}  // namespace kiln::cuda::kernels
