// Global average pooling y (N, C) = mean over (H, W) of x (N, C, H, W), and its backward
// dx = dy / (H W) broadcast; f32, bf16 or f16 (elem.hpp; sums in f32). Plain loops: one (n, c)
// plane per iteration, split across threads when the tensor is large; no plan, nothing cached.
#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "ops/elem.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

/// Runs plane(i) for i in [0, planes): threads only when the whole tensor is large.
template <class Plane>
void for_each_plane(std::int64_t planes, std::int64_t plane_size, Plane&& plane) {
  if (planes * plane_size > kParallelMinElements && planes > 1) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < planes; ++i) plane(i);
  } else {
    for (std::int64_t i = 0; i < planes; ++i) plane(i);
  }
}

}  // namespace

void CpuBackend::global_avgpool_forward(const Tensor& y, const Tensor& x) {
  const OpCheck check(Op::global_avgpool_forward);
  check.usable("y", y).usable("x", x).float_dtype("x", x).rank("x", x, 4).dtype("y", y, x.dtype());
  check.shape("y", y, {x.dim(0), x.dim(1)});
  const std::int64_t hw = x.dim(2) * x.dim(3);
  if (hw == 0) check.fail(fmt::format("x {} has an empty spatial extent", x.describe()));
  const float inv = 1.0f / static_cast<float>(hw);
  use_our_threads();
  with_float_dtype(x.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(x.data());
    T* out = static_cast<T*>(y.data());
    for_each_plane(y.numel(), hw, [&](std::int64_t i) {
      const T* p = in + i * hw;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t j = 0; j < hw; ++j) sum += E::load(p[j]);
      out[i] = E::store(sum * inv);
    });
  });
}

void CpuBackend::global_avgpool_backward(const Tensor& dx, const Tensor& dy) {
  const OpCheck check(Op::global_avgpool_backward);
  check.usable("dx", dx).usable("dy", dy).float_dtype("dy", dy).rank("dx", dx, 4);
  check.dtype("dx", dx, dy.dtype()).shape("dy", dy, {dx.dim(0), dx.dim(1)});
  const std::int64_t hw = dx.dim(2) * dx.dim(3);
  const float inv = hw > 0 ? 1.0f / static_cast<float>(hw) : 0.0f;
  use_our_threads();
  with_float_dtype(dy.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(dy.data());
    T* out = static_cast<T*>(dx.data());
    for_each_plane(dy.numel(), hw, [&](std::int64_t i) {
      const T v = E::store(E::load(in[i]) * inv);
      T* p = out + i * hw;
#pragma omp simd
      for (std::int64_t j = 0; j < hw; ++j) p[j] = v;
    });
  });
}

}  // namespace kiln::cpu
