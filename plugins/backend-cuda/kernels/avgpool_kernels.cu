// Global average pooling for NCHW and channels-last images (f32/f16/bf16 storage, f32 sums).
// NCHW: one warp per (n, c) plane, lanes stride over the plane's H*W contiguous values and a
// shuffle reduction finishes. NHWC: one thread per (n, c); neighbouring threads read neighbouring
// channels, so every step of the H*W loop is a coalesced row of C values. Backward is an
// element-wise broadcast of dy / (H W) in dx's layout (the value is rounded once, as on the cpu).
#include "kernels/avgpool_kernels.hpp"

#include "cuda_check.hpp"
#include "kernels/block_reduce.cuh"
#include "kernels/device_elem.cuh"
#include "kernels/launch_geometry.hpp"

namespace kiln::cuda::kernels {
namespace {

template <class T>
__global__ void avgpool_nchw_kernel(T* y, const T* x, std::int64_t planes, std::int64_t hw,
                                    float inv) {
  using E = Elem<T>;
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = grid_stride() / 32;
  // The loop bound is the same for all lanes of a warp, so the shuffles below never diverge.
  for (std::int64_t plane = global_thread() / 32; plane < planes; plane += warps) {
    const T* p = x + plane * hw;
    float sum = 0.0f;
    for (std::int64_t j = lane; j < hw; j += 32) sum += E::load(p[j]);
    sum = warp_sum(sum);
    if (lane == 0) y[plane] = E::store(sum * inv);
  }
}

template <class T>
__global__ void avgpool_nhwc_kernel(T* y, const T* x, std::int64_t n, std::int64_t c,
                                    std::int64_t hw, float inv) {
  using E = Elem<T>;
  const std::int64_t outputs = n * c;
  for (std::int64_t i = global_thread(); i < outputs; i += grid_stride()) {
    const std::int64_t image = i / c, channel = i - image * c;
    const T* p = x + image * hw * c + channel;
    float sum = 0.0f;
    for (std::int64_t j = 0; j < hw; ++j) sum += E::load(p[j * c]);
    y[i] = E::store(sum * inv);
  }
}

template <class T>
__global__ void avgpool_backward_nchw_kernel(T* dx, const T* dy, std::int64_t total,
                                             std::int64_t hw, float inv) {
  using E = Elem<T>;
  for (std::int64_t i = global_thread(); i < total; i += grid_stride()) {
    dx[i] = E::store(E::load(dy[i / hw]) * inv);
  }
}

template <class T>
__global__ void avgpool_backward_nhwc_kernel(T* dx, const T* dy, std::int64_t total,
                                             std::int64_t c, std::int64_t hw, float inv) {
  using E = Elem<T>;
  for (std::int64_t i = global_thread(); i < total; i += grid_stride()) {
    const std::int64_t image = i / (hw * c), channel = i % c;
    dx[i] = E::store(E::load(dy[image * c + channel]) * inv);
  }
}

}  // namespace

void global_avgpool_forward(void* y, const void* x, const ImageGeometry& g, DType dtype,
                            cudaStream_t stream) {
  if (g.n * g.c <= 0 || g.hw <= 0) return;
  const float inv = 1.0f / static_cast<float>(g.hw);
  with_float_type(dtype, "global_avgpool_forward", [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(y);
    const T* in = static_cast<const T*>(x);
    if (g.layout == Layout::nhwc) {
      const LaunchGeometry geo = grid_stride_geometry(g.n * g.c);
      avgpool_nhwc_kernel<T><<<geo.grid, geo.block, 0, stream>>>(out, in, g.n, g.c, g.hw, inv);
    } else {
      const LaunchGeometry geo = grid_stride_geometry(g.n * g.c * 32);
      avgpool_nchw_kernel<T><<<geo.grid, geo.block, 0, stream>>>(out, in, g.n * g.c, g.hw, inv);
    }
    check_last_launch("global_avgpool_forward");
  });
}

void global_avgpool_backward(void* dx, const void* dy, const ImageGeometry& g, DType dtype,
                             cudaStream_t stream) {
  const std::int64_t total = g.n * g.c * g.hw;
  if (total <= 0) return;
  const float inv = 1.0f / static_cast<float>(g.hw);
  with_float_type(dtype, "global_avgpool_backward", [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dx);
    const T* in = static_cast<const T*>(dy);
    const LaunchGeometry geo = grid_stride_geometry(total);
    if (g.layout == Layout::nhwc) {
      avgpool_backward_nhwc_kernel<T><<<geo.grid, geo.block, 0, stream>>>(out, in, total, g.c, g.hw, inv);
    } else {
      avgpool_backward_nchw_kernel<T><<<geo.grid, geo.block, 0, stream>>>(out, in, total, g.hw, inv);
    }
    check_last_launch("global_avgpool_backward");
  });
}

}  // namespace kiln::cuda::kernels
