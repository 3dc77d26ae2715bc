// Global average pooling y (N, C) = mean over (H, W) of x (N, C, H, W), and its backward
// dx = dy / (H W) broadcast; f32, bf16 or f16 (elem.hpp; sums in f32). Plain loops, no plan:
// NCHW walks one contiguous (n, c) plane per iteration; channels-last walks one image per
// iteration, adding its H*W rows of C channels into a per-image f32 accumulator (contiguous,
// vectorised over channels). Split across threads when the tensor is large.
#include <algorithm>
#include <vector>

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

void forward_channels_last(const Tensor& y, const Tensor& x) {
  const std::int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  const float inv = 1.0f / static_cast<float>(hw);
  with_float_dtype(x.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(x.data());
    T* out = static_cast<T*>(y.data());
    for_each_plane(n, hw * c, [&](std::int64_t i) {
      std::vector<float> acc(static_cast<std::size_t>(c), 0.0f);
      float* a = acc.data();
      for (std::int64_t j = 0; j < hw; ++j) {
        const T* row = in + (i * hw + j) * c;
#pragma omp simd
        for (std::int64_t k = 0; k < c; ++k) a[k] += E::load(row[k]);
      }
      for (std::int64_t k = 0; k < c; ++k) out[i * c + k] = E::store(a[k] * inv);
    });
  });
}

void backward_channels_last(const Tensor& dx, const Tensor& dy) {
  const std::int64_t n = dx.dim(0), c = dx.dim(1), hw = dx.dim(2) * dx.dim(3);
  const float inv = hw > 0 ? 1.0f / static_cast<float>(hw) : 0.0f;
  with_float_dtype(dy.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(dy.data());
    T* out = static_cast<T*>(dx.data());
    for_each_plane(n, hw * c, [&](std::int64_t i) {
      std::vector<T> row(static_cast<std::size_t>(c));
      for (std::int64_t k = 0; k < c; ++k) row[static_cast<std::size_t>(k)] = E::store(E::load(in[i * c + k]) * inv);
      for (std::int64_t j = 0; j < hw; ++j) std::copy(row.begin(), row.end(), out + (i * hw + j) * c);
    });
  });
}

}  // namespace

void CpuBackend::global_avgpool_forward(const Tensor& y, const Tensor& x) {
  sdk::check_global_avgpool_forward(OpCheck(Op::global_avgpool_forward), y, x);
  if (x.layout() == Layout::nhwc) {
    use_our_threads();
    forward_channels_last(y, x);
    return;
  }
  const std::int64_t hw = x.dim(2) * x.dim(3);
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
  sdk::check_global_avgpool_backward(OpCheck(Op::global_avgpool_backward), dx, dy);
  if (dx.layout() == Layout::nhwc) {
    use_our_threads();
    backward_channels_last(dx, dy);
    return;
  }
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
