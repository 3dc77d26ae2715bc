// add, scale, cast and check_finite kernels (f32/f16/bf16 storage, f32 math), and lerp (f32).
// cast converts with round-to-nearest-even (cuda_fp16/cuda_bf16 intrinsics), like the cpu
// backend's bit-twiddling conversions; NaN stays NaN and out-of-range f32 becomes inf in f16.
// check_finite tests the exponent bits (all ones = inf or NaN) and only ever writes 1 into the
// flag, once per block that found one, so several tensors can share a flag and the result does
// not depend on scheduling.
#include "kernels/elementwise_kernels.hpp"

#include "kernels/dtype_dispatch.hpp"
#include "kernels/map_kernels.cuh"

namespace kiln::cuda::kernels {
namespace {

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Scale {
  float factor;
  __device__ float operator()(float a) const { return a * factor; }
};
/// torch.lerp's two sides; the branch is the same for every thread of a launch (one weight).
struct Lerp {
  float weight;
  float rest;  // 1 - weight, exact for weight in [0.5, 1] (Sterbenz), the only side that uses it
  __device__ float operator()(float d, float s) const {
    return weight < 0.5f ? d + weight * (s - d) : s - (s - d) * rest;
  }
};

template <class S, class D, int V>
__global__ void cast_kernel(D* out, const S* in, std::int64_t n) {
  const std::int64_t packs = n / V;
  for (std::int64_t i = global_thread(); i < packs; i += grid_stride()) {
    const Pack<S, V> p = reinterpret_cast<const Pack<S, V>*>(in)[i];
    Pack<D, V> q;
#pragma unroll
    for (int k = 0; k < V; ++k) q.v[k] = Elem<D>::store(Elem<S>::load(p.v[k]));
    reinterpret_cast<Pack<D, V>*>(out)[i] = q;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_stride()) {
    out[i] = Elem<D>::store(Elem<S>::load(in[i]));
  }
}

template <class S, class D>
void launch_cast(void* dst, const void* src, std::int64_t n, cudaStream_t stream) {
  // Four elements per access: 16 bytes of f32 on one side, 8 of the 16-bit type on the other.
  constexpr int kV = 4;
  D* out = static_cast<D*>(dst);
  const S* in = static_cast<const S*>(src);
  const bool aligned = reinterpret_cast<std::uintptr_t>(out) % (sizeof(D) * kV) == 0 &&
                       reinterpret_cast<std::uintptr_t>(in) % (sizeof(S) * kV) == 0;
  if (aligned) {
    const LaunchGeometry g = grid_stride_geometry((n + kV - 1) / kV);
    cast_kernel<S, D, kV><<<g.grid, g.block, 0, stream>>>(out, in, n);
  } else {
    const LaunchGeometry g = grid_stride_geometry(n);
    cast_kernel<S, D, 1><<<g.grid, g.block, 0, stream>>>(out, in, n);
  }
  check_last_launch("cast");
}

/// Bits is the unsigned integer of the element's width; mask selects the exponent field.
template <class Bits>
__global__ void check_finite_kernel(std::int32_t* flag, const Bits* bits, std::int64_t n, Bits mask) {
  int found = 0;
  for (std::int64_t i = global_thread(); i < n; i += grid_stride()) {
    found |= (bits[i] & mask) == mask ? 1 : 0;
  }
  if (__syncthreads_or(found) != 0 && threadIdx.x == 0) *flag = 1;
}

}  // namespace

void add(void* c, const void* a, const void* b, std::int64_t n, DType dtype, cudaStream_t stream) {
  with_float_type(dtype, "add", [&](auto tag) {
    using T = decltype(tag);
    launch_map2(static_cast<T*>(c), static_cast<const T*>(a), static_cast<const T*>(b), n, Add{},
                stream, "add");
  });
}

void scale(void* t, float factor, std::int64_t n, DType dtype, cudaStream_t stream) {
  with_float_type(dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    launch_map1(static_cast<T*>(t), static_cast<const T*>(t), n, Scale{factor}, stream, "scale");
  });
}

void lerp(float* dst, const float* src, float weight, std::int64_t n, cudaStream_t stream) {
  launch_map2(dst, static_cast<const float*>(dst), src, n, Lerp{weight, 1.0f - weight}, stream, "lerp");
}

void cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n,
          cudaStream_t stream) {
  if (n <= 0) return;
  switch (cast_path(src_dtype, dst_dtype)) {
    case CastPath::copy:
      if (dst != src) {
        check_cuda(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * dtype_size(src_dtype),
                                   cudaMemcpyDeviceToDevice, stream),
                   "cast (same-dtype copy)");
      }
      return;
    case CastPath::f32_to_f16: launch_cast<float, __half>(dst, src, n, stream); return;
    case CastPath::f32_to_bf16: launch_cast<float, __nv_bfloat16>(dst, src, n, stream); return;
    case CastPath::f16_to_f32: launch_cast<__half, float>(dst, src, n, stream); return;
    case CastPath::bf16_to_f32: launch_cast<__nv_bfloat16, float>(dst, src, n, stream); return;
    case CastPath::unsupported: break;
  }
  throw BackendError("cuda backend, cast: no kernel converts " + std::string(dtype_name(src_dtype)) +
                     " to " + std::string(dtype_name(dst_dtype)) +
                     "; validate the arguments first (f32 <-> bf16/f16 only)");
}

void check_finite(std::int32_t* flag, const void* t, std::int64_t n, DType dtype,
                  cudaStream_t stream) {
  if (n <= 0) return;
  const std::uint32_t mask = exponent_mask(dtype);
  if (mask == 0) {
    throw BackendError("cuda backend, check_finite: kernel launched for dtype " +
                       std::string(dtype_name(dtype)) + "; validate the arguments first");
  }
  const LaunchGeometry g = grid_stride_geometry(n);
  if (dtype == DType::f32) {
    check_finite_kernel<std::uint32_t><<<g.grid, g.block, 0, stream>>>(
        flag, static_cast<const std::uint32_t*>(t), n, mask);
  } else {
    check_finite_kernel<std::uint16_t><<<g.grid, g.block, 0, stream>>>(
        flag, static_cast<const std::uint16_t*>(t), n, static_cast<std::uint16_t>(mask));
  }
  check_last_launch("check_finite");
}

}  // namespace kiln::cuda::kernels
