// u8 (N, H, W, 3) images -> normalised (N, 3, H, W) activations in f32/f16/bf16, one thread per
// output element. Channels-last output is a straight element-wise pass over both buffers (channel
// = index mod 3); NCHW output reads the three interleaved bytes with a stride of 3, which the L1
// cache absorbs (the op moves a few MB per step, far from the memory roofline).
#include "kernels/normalize_image_kernels.hpp"

#include "cuda_check.hpp"
#include "kernels/device_elem.cuh"
#include "kernels/launch_geometry.hpp"

namespace kiln::cuda::kernels {
namespace {

template <class T>
__global__ void normalize_nhwc_kernel(T* dst, const std::uint8_t* src, std::int64_t total,
                                      ChannelAffine a) {
  for (std::int64_t i = global_thread(); i < total; i += grid_stride()) {
    const int c = static_cast<int>(i % 3);
    dst[i] = Elem<T>::store(static_cast<float>(src[i]) * a.scale[c] + a.shift[c]);
  }
}

template <class T>
__global__ void normalize_nchw_kernel(T* dst, const std::uint8_t* src, std::int64_t total,
                                      std::int64_t hw, ChannelAffine a) {
  for (std::int64_t i = global_thread(); i < total; i += grid_stride()) {
    const std::int64_t pixel = i % hw, plane = i / hw;
    const int c = static_cast<int>(plane % 3);
    const std::int64_t image = plane / 3;
    const float v = static_cast<float>(src[(image * hw + pixel) * 3 + c]);
    dst[i] = Elem<T>::store(v * a.scale[c] + a.shift[c]);
  }
}

}  // namespace

void normalize_image(void* dst, Layout dst_layout, const std::uint8_t* src, std::int64_t n,
                     std::int64_t h, std::int64_t w, const ChannelAffine& affine, DType dtype,
                     cudaStream_t stream) {
  const std::int64_t total = n * 3 * h * w;
  if (total <= 0) return;
  with_float_type(dtype, "normalize_image", [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dst);
    const LaunchGeometry g = grid_stride_geometry(total);
    if (dst_layout == Layout::nhwc) {
      normalize_nhwc_kernel<T><<<g.grid, g.block, 0, stream>>>(out, src, total, affine);
    } else {
      normalize_nchw_kernel<T><<<g.grid, g.block, 0, stream>>>(out, src, total, h * w, affine);
    }
    check_last_launch("normalize_image");
  });
}

}  // namespace kiln::cuda::kernels
