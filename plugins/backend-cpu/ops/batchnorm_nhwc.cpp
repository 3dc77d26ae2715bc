// Plain-loop batch normalisation over channels-last (nhwc) data in f32, bf16 or f16 (batchnorm.cpp
// uses it for every nhwc call).
//
// Why not oneDNN's nspc kernels: they are fast but sum in f32 in an order that loses accuracy on
// narrow, ill-conditioned channels: the golden ResNet step's worst gradient (a 2-channel BN's
// gamma) was 1.7e-3 off the float64 reference with them, against 4.2e-4 with the NCHW kernels and
// 4.5e-4 for PyTorch itself. Here each thread sums a contiguous block of rows (a row is the C
// channels of one pixel, so the inner loop is a SIMD loop over channels) into f32 accumulators
// that are flushed into double every kFlushRows rows, and the per-thread partials are added in
// double. Variance is two-pass (no cancellation). Same contract as batchnorm_loops.hpp: the
// forward produces the mean and the biased variance; the backward OVERWRITES dgamma/dbeta.
// f16 rows are widened to f32 once per row and outputs narrowed from an f32 row (f16_rows.hpp):
// GCC does not vectorise per-element f16 conversions as it does bf16's.
//
// Tried and measured no faster on the 2-core EPYC (ResNet-50 b8 tensors stay in its L3 here, so
// these loops are bound by cache throughput, not DRAM): running the passes in one OpenMP region
// with consecutive passes walking the rows in opposite directions (bit-identical; 25-39% fewer
// simulated last-level misses, but slower: the reversed walks break the prefetch streams), and a
// one-read forward (per-chunk deviations merged in double; the extra arithmetic ate the saved read,
// and it changes rounding). See git history of this file (c337629, 6f29f8e) for the first.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/batchnorm_loops.hpp"
#include "ops/elem.hpp"
#include "ops/f16_convert.hpp"
#include "ops/f16_rows.hpp"
#include "parallel.hpp"

namespace kiln::cpu {
namespace {

constexpr std::int64_t kFlushRows = 64;

/// Per-channel sums over all rows of two row functions, each row adding C values via
/// `add(row, acc1, acc2)`; returns the sums in double (s1, s2 of size C).
template <class AddRow>
void channel_sums(std::int64_t rows, std::int64_t c, std::vector<double>& s1, std::vector<double>& s2,
                  AddRow&& add) {
  const bool parallel = rows * c > kParallelMinElements;
  const int teams = parallel ? omp_get_max_threads() : 1;
  std::vector<double> partial(static_cast<std::size_t>(2 * teams * c), 0.0);
#pragma omp parallel num_threads(teams) if (parallel)
  {
    const int t = omp_get_thread_num();
    const int nt = omp_get_num_threads();
    const std::int64_t begin = rows * t / nt, end = rows * (t + 1) / nt;
    std::vector<float> a1(static_cast<std::size_t>(c), 0.0f), a2(static_cast<std::size_t>(c), 0.0f);
    double* p1 = partial.data() + static_cast<std::size_t>(2 * t) * c;
    double* p2 = p1 + c;
    for (std::int64_t r = begin; r < end; ++r) {
      add(r, a1.data(), a2.data());
      if ((r - begin) % kFlushRows == kFlushRows - 1 || r == end - 1) {
        for (std::int64_t k = 0; k < c; ++k) {
          p1[k] += a1[k];
          p2[k] += a2[k];
          a1[k] = a2[k] = 0.0f;
        }
      }
    }
  }
  s1.assign(static_cast<std::size_t>(c), 0.0);
  s2.assign(static_cast<std::size_t>(c), 0.0);
  for (int t = 0; t < teams; ++t) {
    const double* p1 = partial.data() + static_cast<std::size_t>(2 * t) * c;
    for (std::int64_t k = 0; k < c; ++k) {
      s1[k] += p1[k];
      s2[k] += p1[c + k];
    }
  }
}

/// y = x * a[c] + b[c] over every row.
template <class E>
void affine_rows(std::int64_t rows, std::int64_t c, typename E::T* y, const typename E::T* x, const float* a,
                 const float* b) {
  const auto affine = [&](auto l, const auto* in, auto* out) {
    using L = decltype(l);
#pragma omp simd
    for (std::int64_t k = 0; k < c; ++k) out[k] = L::store(L::load(in[k]) * a[k] + b[k]);
  };
  const auto row = [&](std::int64_t r) {
    if constexpr (kWidensRows<E>) {
      float* in = f32_row_buffer(0, c);
      float* out = f32_row_buffer(1, c);
      f16_to_f32_n(x + r * c, in, static_cast<std::size_t>(c));
      affine(Elem<DType::f32>{}, in, out);
      f32_to_f16_n(out, y + r * c, static_cast<std::size_t>(c));
    } else {
      affine(E{}, x + r * c, y + r * c);
    }
  };
  if (rows * c > kParallelMinElements) {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) row(r);
  } else {
    for (std::int64_t r = 0; r < rows; ++r) row(r);
  }
}

}  // namespace

void bn_nhwc_train_forward(const BatchNormDesc& d, const Tensor& y, float* mean, float* var, const Tensor& x,
                           const float* gamma, const float* beta) {
  const std::int64_t rows = d.n * d.h * d.w, c = d.c;
  const double count = static_cast<double>(rows);
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(x.data());
    std::vector<double> sum, unused;
    // Row r as the loops read it: in place, or (f16) widened into this thread's buffer 0.
    const auto loadable = [&](std::int64_t r) {
      if constexpr (kWidensRows<E>) {
        float* wide = f32_row_buffer(0, c);
        f16_to_f32_n(in + r * c, wide, static_cast<std::size_t>(c));
        return static_cast<const float*>(wide);
      } else {
        return in + r * c;
      }
    };
    using L = std::conditional_t<kWidensRows<E>, Elem<DType::f32>, E>;
    channel_sums(rows, c, sum, unused, [&](std::int64_t r, float* a1, float*) {
      const auto* p = loadable(r);
#pragma omp simd
      for (std::int64_t k = 0; k < c; ++k) a1[k] += L::load(p[k]);
    });
    std::vector<float> m(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) m[k] = static_cast<float>(sum[k] / count);
    std::vector<double> sq;
    channel_sums(rows, c, sq, unused, [&](std::int64_t r, float* a1, float*) {
      const auto* p = loadable(r);
      const float* mk = m.data();
#pragma omp simd
      for (std::int64_t k = 0; k < c; ++k) {
        const float v = L::load(p[k]) - mk[k];
        a1[k] += v * v;
      }
    });
    std::vector<float> a(static_cast<std::size_t>(c)), b(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) {
      const float v = static_cast<float>(sq[k] / count);
      mean[k] = m[k];
      var[k] = v;
      a[k] = gamma[k] / std::sqrt(v + d.eps);
      b[k] = beta[k] - m[k] * a[k];
    }
    affine_rows<E>(rows, c, static_cast<T*>(y.data()), in, a.data(), b.data());
  });
}

void bn_nhwc_infer_forward(const BatchNormDesc& d, const Tensor& y, const Tensor& x, const float* gamma,
                           const float* beta, const float* running_mean, const float* running_var) {
  const std::int64_t rows = d.n * d.h * d.w, c = d.c;
  std::vector<float> a(static_cast<std::size_t>(c)), b(static_cast<std::size_t>(c));
  for (std::int64_t k = 0; k < c; ++k) {
    a[k] = gamma[k] / std::sqrt(running_var[k] + d.eps);
    b[k] = beta[k] - running_mean[k] * a[k];
  }
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    affine_rows<E>(rows, c, static_cast<T*>(y.data()), static_cast<const T*>(x.data()), a.data(), b.data());
  });
}

void bn_nhwc_backward(const BatchNormDesc& d, const Tensor& dx, float* dgamma, float* dbeta, const Tensor& dy,
                      const Tensor& x, const float* gamma, const float* mean, const float* invstd) {
  const std::int64_t rows = d.n * d.h * d.w, c = d.c;
  const float inv_count = 1.0f / static_cast<float>(rows);
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* xs = static_cast<const T*>(x.data());
    const T* gs = static_cast<const T*>(dy.data());
    std::vector<double> sum_dy, sum_dy_xc;  // xc = x - mean
    // Row r of x and of dy as the loops read them: in place, or (f16) widened into this
    // thread's buffers 0 and 1.
    const auto loadable = [&](const T* tensor, int slot, std::int64_t r) {
      if constexpr (kWidensRows<E>) {
        float* wide = f32_row_buffer(slot, c);
        f16_to_f32_n(tensor + r * c, wide, static_cast<std::size_t>(c));
        return static_cast<const float*>(wide);
      } else {
        return tensor + r * c;
      }
    };
    using L = std::conditional_t<kWidensRows<E>, Elem<DType::f32>, E>;
    channel_sums(rows, c, sum_dy, sum_dy_xc, [&](std::int64_t r, float* a1, float* a2) {
      const auto* xp = loadable(xs, 0, r);
      const auto* gp = loadable(gs, 1, r);
#pragma omp simd
      for (std::int64_t k = 0; k < c; ++k) {
        const float g = L::load(gp[k]);
        a1[k] += g;
        a2[k] += g * (L::load(xp[k]) - mean[k]);
      }
    });
    // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), as k (dy - mean_dy - xc slope).
    std::vector<float> scale(static_cast<std::size_t>(c)), shift(static_cast<std::size_t>(c)),
        slope(static_cast<std::size_t>(c));
    for (std::int64_t k = 0; k < c; ++k) {
      const float sum_dy_xhat = static_cast<float>(sum_dy_xc[k]) * invstd[k];
      dgamma[k] = sum_dy_xhat;
      dbeta[k] = static_cast<float>(sum_dy[k]);
      scale[k] = gamma[k] * invstd[k];
      shift[k] = static_cast<float>(sum_dy[k]) * inv_count;
      slope[k] = sum_dy_xhat * inv_count * invstd[k];
    }
    T* out = static_cast<T*>(dx.data());
    const float *sk = scale.data(), *mk = shift.data(), *lk = slope.data();
    const auto row = [&](std::int64_t r) {
      const auto* xp = loadable(xs, 0, r);
      const auto* gp = loadable(gs, 1, r);
      // The output row: in place, or (f16) this thread's buffer 2, narrowed below.
      auto* op = [&] {
        if constexpr (kWidensRows<E>) return f32_row_buffer(2, c);
        else return out + r * c;
      }();
#pragma omp simd
      for (std::int64_t k = 0; k < c; ++k) {
        op[k] = L::store(sk[k] * (L::load(gp[k]) - mk[k] - (L::load(xp[k]) - mean[k]) * lk[k]));
      }
      if constexpr (kWidensRows<E>) f32_to_f16_n(op, out + r * c, static_cast<std::size_t>(c));
    };
    if (rows * c > kParallelMinElements) {
#pragma omp parallel for schedule(static)
      for (std::int64_t r = 0; r < rows; ++r) row(r);
    } else {
      for (std::int64_t r = 0; r < rows; ++r) row(r);
    }
  });
}

}  // namespace kiln::cpu
