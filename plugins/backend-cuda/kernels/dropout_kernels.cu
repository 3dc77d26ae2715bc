// Dropout kernels: the keep decision of element i is dropout_keeps(seed, i, p) (mask_rng.hpp,
// the cpu backend's formula), computed per element with no state, so any grid gives the same
// mask and it matches the cpu backend's byte for byte. p == 0 is an exact copy with an all-ones
// mask, as on the cpu. Scalar grid-stride loops: the 64-bit hash, not memory, bounds the forward.
#include "kernels/dropout_kernels.hpp"

#include "cuda_check.hpp"
#include "kernels/device_elem.cuh"
#include "kernels/launch_geometry.hpp"
#include "kernels/mask_rng.hpp"

namespace kiln::cuda::kernels {
namespace {

template <class T>
__global__ void dropout_forward_kernel(T* y, std::uint8_t* mask, const T* x, std::int64_t n,
                                       float p, float inv_keep, std::uint64_t seed) {
  using E = Elem<T>;
  for (std::int64_t i = global_thread(); i < n; i += grid_stride()) {
    const bool kept = dropout_keeps(seed, static_cast<std::uint64_t>(i), p);
    mask[i] = kept ? 1 : 0;
    y[i] = kept ? E::store(E::load(x[i]) * inv_keep) : E::store(0.0f);
  }
}

template <class T>
__global__ void dropout_backward_kernel(T* dx, const T* dy, const std::uint8_t* mask,
                                        std::int64_t n, float inv_keep) {
  using E = Elem<T>;
  for (std::int64_t i = global_thread(); i < n; i += grid_stride()) {
    dx[i] = mask[i] != 0 ? E::store(E::load(dy[i]) * inv_keep) : E::store(0.0f);
  }
}

}  // namespace

void dropout_forward(void* y, std::uint8_t* mask, const void* x, std::int64_t n, DType dtype,
                     float p, std::uint64_t seed, cudaStream_t stream) {
  if (n <= 0) return;
  if (p == 0.0f) {
    if (y != x) {
      check_cuda(cudaMemcpyAsync(y, x, static_cast<std::size_t>(n) * dtype_size(dtype),
                                 cudaMemcpyDeviceToDevice, stream),
                 "dropout_forward (p = 0 copy)");
    }
    check_cuda(cudaMemsetAsync(mask, 1, static_cast<std::size_t>(n), stream),
               "dropout_forward (p = 0 mask)");
    return;
  }
  const float inv_keep = 1.0f / (1.0f - p);
  with_float_type(dtype, "dropout_forward", [&](auto tag) {
    using T = decltype(tag);
    const LaunchGeometry g = grid_stride_geometry(n);
    dropout_forward_kernel<T><<<g.grid, g.block, 0, stream>>>(
        static_cast<T*>(y), mask, static_cast<const T*>(x), n, p, inv_keep, seed);
    check_last_launch("dropout_forward");
  });
}

void dropout_backward(void* dx, const void* dy, const std::uint8_t* mask, std::int64_t n,
                      DType dtype, float p, cudaStream_t stream) {
  if (n <= 0) return;
  const float inv_keep = 1.0f / (1.0f - p);
  with_float_type(dtype, "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const LaunchGeometry g = grid_stride_geometry(n);
    dropout_backward_kernel<T><<<g.grid, g.block, 0, stream>>>(
        static_cast<T*>(dx), static_cast<const T*>(dy), mask, n, inv_keep);
    check_last_launch("dropout_backward");
  });
}

}  // namespace kiln::cuda::kernels
