// Generic grid-stride "map" kernels: out[i] = f(a[i], ...) over one storage type T, math in f32.
// V is the elements per vectorised access (16 bytes: 4 floats, 8 halves) or 1; the vector loop
// covers n / V packs and a scalar loop the tail. Outputs may alias inputs (in-place scale, y = x
// activations), so no pointer is __restrict__: each element is read and written by one thread.
// launch_map() picks V from the pointers' alignment (launch_geometry.hpp) and checks the launch.
#pragma once

#include <cstdint>

#include "cuda_check.hpp"
#include "kernels/device_elem.cuh"
#include "kernels/launch_geometry.hpp"

namespace kiln::cuda::kernels {

template <class T, int V, class F>
__global__ void map1_kernel(T* out, const T* a, std::int64_t n, F f) {
  using E = Elem<T>;
  const std::int64_t packs = n / V;
  for (std::int64_t i = global_thread(); i < packs; i += grid_stride()) {
    const Pack<T, V> pa = reinterpret_cast<const Pack<T, V>*>(a)[i];
    Pack<T, V> po;
#pragma unroll
    for (int k = 0; k < V; ++k) po.v[k] = E::store(f(E::load(pa.v[k])));
    reinterpret_cast<Pack<T, V>*>(out)[i] = po;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_stride()) {
    out[i] = E::store(f(E::load(a[i])));
  }
}

template <class T, int V, class F>
__global__ void map2_kernel(T* out, const T* a, const T* b, std::int64_t n, F f) {
  using E = Elem<T>;
  const std::int64_t packs = n / V;
  for (std::int64_t i = global_thread(); i < packs; i += grid_stride()) {
    const Pack<T, V> pa = reinterpret_cast<const Pack<T, V>*>(a)[i];
    const Pack<T, V> pb = reinterpret_cast<const Pack<T, V>*>(b)[i];
    Pack<T, V> po;
#pragma unroll
    for (int k = 0; k < V; ++k) po.v[k] = E::store(f(E::load(pa.v[k]), E::load(pb.v[k])));
    reinterpret_cast<Pack<T, V>*>(out)[i] = po;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_stride()) {
    out[i] = E::store(f(E::load(a[i]), E::load(b[i])));
  }
}

template <class T, int V, class F>
__global__ void map3_kernel(T* out, const T* a, const T* b, const T* c, std::int64_t n, F f) {
  using E = Elem<T>;
  const std::int64_t packs = n / V;
  for (std::int64_t i = global_thread(); i < packs; i += grid_stride()) {
    const Pack<T, V> pa = reinterpret_cast<const Pack<T, V>*>(a)[i];
    const Pack<T, V> pb = reinterpret_cast<const Pack<T, V>*>(b)[i];
    const Pack<T, V> pc = reinterpret_cast<const Pack<T, V>*>(c)[i];
    Pack<T, V> po;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      po.v[k] = E::store(f(E::load(pa.v[k]), E::load(pb.v[k]), E::load(pc.v[k])));
    }
    reinterpret_cast<Pack<T, V>*>(out)[i] = po;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_stride()) {
    out[i] = E::store(f(E::load(a[i]), E::load(b[i]), E::load(c[i])));
  }
}

/// out = f(a): vectorised when out and a are 16-byte aligned.
template <class T, class F>
void launch_map1(T* out, const T* a, std::int64_t n, F f, cudaStream_t stream, const char* op) {
  constexpr int kV = static_cast<int>(kVectorBytes / sizeof(T));
  if (n <= 0) return;
  if (vector_width(sizeof(T), {out, a}) == kV) {
    const LaunchGeometry g = grid_stride_geometry((n + kV - 1) / kV);
    map1_kernel<T, kV><<<g.grid, g.block, 0, stream>>>(out, a, n, f);
  } else {
    const LaunchGeometry g = grid_stride_geometry(n);
    map1_kernel<T, 1><<<g.grid, g.block, 0, stream>>>(out, a, n, f);
  }
  check_last_launch(op);
}

/// out = f(a, b).
template <class T, class F>
void launch_map2(T* out, const T* a, const T* b, std::int64_t n, F f, cudaStream_t stream,
                 const char* op) {
  constexpr int kV = static_cast<int>(kVectorBytes / sizeof(T));
  if (n <= 0) return;
  if (vector_width(sizeof(T), {out, a, b}) == kV) {
    const LaunchGeometry g = grid_stride_geometry((n + kV - 1) / kV);
    map2_kernel<T, kV><<<g.grid, g.block, 0, stream>>>(out, a, b, n, f);
  } else {
    const LaunchGeometry g = grid_stride_geometry(n);
    map2_kernel<T, 1><<<g.grid, g.block, 0, stream>>>(out, a, b, n, f);
  }
  check_last_launch(op);
}

/// out = f(a, b, c).
template <class T, class F>
void launch_map3(T* out, const T* a, const T* b, const T* c, std::int64_t n, F f,
                 cudaStream_t stream, const char* op) {
  constexpr int kV = static_cast<int>(kVectorBytes / sizeof(T));
  if (n <= 0) return;
  if (vector_width(sizeof(T), {out, a, b, c}) == kV) {
    const LaunchGeometry g = grid_stride_geometry((n + kV - 1) / kV);
    map3_kernel<T, kV><<<g.grid, g.block, 0, stream>>>(out, a, b, c, n, f);
  } else {
    const LaunchGeometry g = grid_stride_geometry(n);
    map3_kernel<T, 1><<<g.grid, g.block, 0, stream>>>(out, a, b, c, n, f);
  }
  check_last_launch(op);
}

}  // namespace kiln::cuda::kernels
