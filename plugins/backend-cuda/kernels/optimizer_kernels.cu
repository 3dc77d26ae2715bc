// Fused optimizer kernels over flat f32 buffers: one read and one write of each state tensor per
// step, float4 accesses when every buffer is 16-byte aligned (the parameter arena is), scalar
// otherwise. The per-element math is the cpu backend's (plugins/backend-cpu/ops/optimizers.cpp)
// line for line; momentum == 0 and Nesterov are template parameters so the loops have no branches.
#include "kernels/optimizer_kernels.hpp"

#include "cuda_check.hpp"
#include "kernels/device_elem.cuh"
#include "kernels/launch_geometry.hpp"

namespace kiln::cuda::kernels {
namespace {

enum class SgdVariant { plain, momentum, nesterov };

struct SgdArgs {
  float lr, weight_decay, momentum, damp;
};

template <SgdVariant kVariant>
__device__ __forceinline__ void sgd_element(float& p, float* buf, float g, const SgdArgs& a) {
  const float gi = g + a.weight_decay * p;
  if constexpr (kVariant == SgdVariant::plain) {
    p -= a.lr * gi;
  } else {
    const float b = a.momentum * *buf + a.damp * gi;
    *buf = b;
    p -= kVariant == SgdVariant::nesterov ? a.lr * (gi + a.momentum * b) : a.lr * b;
  }
}

template <SgdVariant kVariant, int V>
__global__ void sgd_kernel(float* param, float* buf, const float* grad, std::int64_t n, SgdArgs a) {
  const std::int64_t packs = n / V;
  for (std::int64_t i = global_thread(); i < packs; i += grid_stride()) {
    Pack<float, V> p = reinterpret_cast<Pack<float, V>*>(param)[i];
    const Pack<float, V> g = reinterpret_cast<const Pack<float, V>*>(grad)[i];
    Pack<float, V> b{};
    if constexpr (kVariant != SgdVariant::plain) b = reinterpret_cast<Pack<float, V>*>(buf)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) sgd_element<kVariant>(p.v[k], &b.v[k], g.v[k], a);
    reinterpret_cast<Pack<float, V>*>(param)[i] = p;
    if constexpr (kVariant != SgdVariant::plain) reinterpret_cast<Pack<float, V>*>(buf)[i] = b;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_stride()) {
    sgd_element<kVariant>(param[i], kVariant == SgdVariant::plain ? nullptr : &buf[i], grad[i], a);
  }
}

__device__ __forceinline__ void adam_element(float& p, float& m, float& v, float g,
                                             const AdamCoefficients& c) {
  const float pi = p * c.shrink;
  const float gi = g + c.coupled_decay * pi;
  const float mi = c.beta1 * m + (1.0f - c.beta1) * gi;
  const float vi = c.beta2 * v + (1.0f - c.beta2) * gi * gi;
  m = mi;
  v = vi;
  p = pi - c.step_size * mi / (sqrtf(vi) * c.inv_sqrt_bias2 + c.eps);
}

template <int V>
__global__ void adam_kernel(float* param, float* m, float* v, const float* grad, std::int64_t n,
                            AdamCoefficients c) {
  const std::int64_t packs = n / V;
  for (std::int64_t i = global_thread(); i < packs; i += grid_stride()) {
    Pack<float, V> p = reinterpret_cast<Pack<float, V>*>(param)[i];
    Pack<float, V> mp = reinterpret_cast<Pack<float, V>*>(m)[i];
    Pack<float, V> vp = reinterpret_cast<Pack<float, V>*>(v)[i];
    const Pack<float, V> g = reinterpret_cast<const Pack<float, V>*>(grad)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) adam_element(p.v[k], mp.v[k], vp.v[k], g.v[k], c);
    reinterpret_cast<Pack<float, V>*>(param)[i] = p;
    reinterpret_cast<Pack<float, V>*>(m)[i] = mp;
    reinterpret_cast<Pack<float, V>*>(v)[i] = vp;
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_stride()) {
    adam_element(param[i], m[i], v[i], grad[i], c);
  }
}

template <SgdVariant kVariant>
void launch_sgd(float* param, float* buf, const float* grad, std::int64_t n, const SgdArgs& a,
                cudaStream_t stream) {
  constexpr int kV = 4;
  if (vector_width(sizeof(float), {param, buf, grad}) == kV) {
    const LaunchGeometry g = grid_stride_geometry((n + kV - 1) / kV);
    sgd_kernel<kVariant, kV><<<g.grid, g.block, 0, stream>>>(param, buf, grad, n, a);
  } else {
    const LaunchGeometry g = grid_stride_geometry(n);
    sgd_kernel<kVariant, 1><<<g.grid, g.block, 0, stream>>>(param, buf, grad, n, a);
  }
  check_last_launch("sgd_update");
}

}  // namespace

void sgd_update(float* param, float* momentum_buf, const float* grad, std::int64_t n,
                const SgdStep& step, cudaStream_t stream) {
  if (n <= 0) return;
  const SgdArgs a{step.lr, step.weight_decay, step.momentum, 1.0f - step.dampening};
  if (step.momentum == 0.0f) {
    launch_sgd<SgdVariant::plain>(param, nullptr, grad, n, a, stream);
  } else if (step.nesterov == SgdStep::Nesterov::yes) {
    launch_sgd<SgdVariant::nesterov>(param, momentum_buf, grad, n, a, stream);
  } else {
    launch_sgd<SgdVariant::momentum>(param, momentum_buf, grad, n, a, stream);
  }
}

void adam_update(float* param, float* m, float* v, const float* grad, std::int64_t n,
                 const AdamCoefficients& coefficients, cudaStream_t stream) {
  if (n <= 0) return;
  constexpr int kV = 4;
  if (vector_width(sizeof(float), {param, m, v, grad}) == kV) {
    const LaunchGeometry g = grid_stride_geometry((n + kV - 1) / kV);
    adam_kernel<kV><<<g.grid, g.block, 0, stream>>>(param, m, v, grad, n, coefficients);
  } else {
    const LaunchGeometry g = grid_stride_geometry(n);
    adam_kernel<1><<<g.grid, g.block, 0, stream>>>(param, m, v, grad, n, coefficients);
  }
  check_last_launch("adam_update");
}

}  // namespace kiln::cuda::kernels
