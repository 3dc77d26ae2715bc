// Plain-loop batch normalisation over NCHW data, used for bf16 data (batchnorm.cpp).
//
// Why: oneDNN 2.6 has no JIT batch-norm for plain NCHW; its `ncsp` fallback widens bf16 element
// by element and measured 3-4x slower than its own f32 path (8x256x56x56, one thread: 33 vs 10 ms
// forward, 55 vs 12 ms backward), which would dominate a bf16 ResNet step. These loops read bf16
// through elem.hpp into f32 SIMD lanes; per-channel sums are taken in f32 over each contiguous
// H*W run and added up in double, so long channels do not lose precision. Channels are split
// across the OpenMP team (each channel is independent). Variance is two-pass (no cancellation).
#include "ops/batchnorm_loops.hpp"

#include <cmath>

#include "ops/elem.hpp"
#include "parallel.hpp"

namespace kiln::cpu {
namespace {

template <class Channel>
void for_each_channel(const BatchNormDesc& d, Channel&& channel) {
  if (d.n * d.c * d.h * d.w > kParallelMinElements && d.c > 1) {
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < d.c; ++c) channel(c);
  } else {
    for (std::int64_t c = 0; c < d.c; ++c) channel(c);
  }
}

/// y = x * a[c] + b[c] over one channel.
template <class E>
void affine_channel(const BatchNormDesc& d, std::int64_t c, typename E::T* y,
                    const typename E::T* x, float a, float b) {
  const std::int64_t hw = d.h * d.w;
  for (std::int64_t n = 0; n < d.n; ++n) {
    const std::int64_t off = (n * d.c + c) * hw;
#pragma omp simd
    for (std::int64_t i = 0; i < hw; ++i) y[off + i] = E::store(E::load(x[off + i]) * a + b);
  }
}

}  // namespace

void bn_loops_train_forward(const BatchNormDesc& d, const Tensor& y, float* mean, float* var,
                            const Tensor& x, const float* gamma, const float* beta) {
  const std::int64_t hw = d.h * d.w;
  const double count = static_cast<double>(d.n * hw);
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(x.data());
    T* out = static_cast<T*>(y.data());
    for_each_channel(d, [&](std::int64_t c) {
      double sum = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n) {
        const T* p = in + (n * d.c + c) * hw;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (std::int64_t i = 0; i < hw; ++i) s += E::load(p[i]);
        sum += s;
      }
      const float m = static_cast<float>(sum / count);
      double sq = 0.0;
      for (std::int64_t n = 0; n < d.n; ++n) {
        const T* p = in + (n * d.c + c) * hw;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (std::int64_t i = 0; i < hw; ++i) {
          const float v = E::load(p[i]) - m;
          s += v * v;
        }
        sq += s;
      }
      const float v = static_cast<float>(sq / count);
      mean[c] = m;
      var[c] = v;
      const float a = gamma[c] / std::sqrt(v + d.eps);
      affine_channel<E>(d, c, out, in, a, beta[c] - m * a);
    });
  });
}

void bn_loops_infer_forward(const BatchNormDesc& d, const Tensor& y, const Tensor& x,
                            const float* gamma, const float* beta, const float* running_mean,
                            const float* running_var) {
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(x.data());
    T* out = static_cast<T*>(y.data());
    for_each_channel(d, [&](std::int64_t c) {
      const float a = gamma[c] / std::sqrt(running_var[c] + d.eps);
      affine_channel<E>(d, c, out, in, a, beta[c] - running_mean[c] * a);
    });
  });
}

void bn_loops_backward(const BatchNormDesc& d, const Tensor& dx, float* dgamma, float* dbeta,
                       const Tensor& dy, const Tensor& x, const float* gamma, const float* mean,
                       const float* invstd) {
  const std::int64_t hw = d.h * d.w;
  const float inv_count = 1.0f / static_cast<float>(d.n * hw);
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* xs = static_cast<const T*>(x.data());
    const T* gs = static_cast<const T*>(dy.data());
    T* out = static_cast<T*>(dx.data());
    for_each_channel(d, [&](std::int64_t c) {
      const float m = mean[c], is = invstd[c];
      double sum_dy = 0.0, sum_dy_xc = 0.0;  // xc = x - mean
      for (std::int64_t n = 0; n < d.n; ++n) {
        const std::int64_t off = (n * d.c + c) * hw;
        float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
        for (std::int64_t i = 0; i < hw; ++i) {
          const float g = E::load(gs[off + i]);
          s1 += g;
          s2 += g * (E::load(xs[off + i]) - m);
        }
        sum_dy += s1;
        sum_dy_xc += s2;
      }
      const float sum_dy_xhat = static_cast<float>(sum_dy_xc) * is;
      dgamma[c] = sum_dy_xhat;
      dbeta[c] = static_cast<float>(sum_dy);
      // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
      const float k = gamma[c] * is;
      const float mean_dy = static_cast<float>(sum_dy) * inv_count;
      const float slope = sum_dy_xhat * inv_count * is;  // multiplies (x - mean)
      for (std::int64_t n = 0; n < d.n; ++n) {
        const std::int64_t off = (n * d.c + c) * hw;
#pragma omp simd
        for (std::int64_t i = 0; i < hw; ++i) {
          const float xc = E::load(xs[off + i]) - m;
          out[off + i] = E::store(k * (E::load(gs[off + i]) - mean_dy - xc * slope));
        }
      }
    });
  });
}

}  // namespace kiln::cpu
