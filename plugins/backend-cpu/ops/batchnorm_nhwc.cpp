// Plain-loop batch normalisation over channels-last (nhwc) data in f32, bf16 or f16 (batchnorm.cpp
// uses it for every nhwc call).
//
// Why not oneDNN's nspc kernels: they are fast but sum in f32 in an order that loses accuracy on
// narrow, ill-conditioned channels: the golden ResNet step's worst gradient (a 2-channel BN's
// gamma) was 1.7e-3 off the float64 reference with them, against 4.2e-4 with the NCHW kernels and
// 4.5e-4 for PyTorch itself. Here each thread sums a contiguous block of rows (a row is the C
// channels of one pixel, so the inner loop is a SIMD loop over channels) in chunks of kFlushRows
// rows into f32, adds its chunk sums into double in chunk order, and the per-thread partials are
// added in double in thread order. Variance is two-pass (no cancellation). Same contract as
// batchnorm_loops.hpp: the forward produces the mean and the biased variance; the backward
// OVERWRITES dgamma/dbeta.
//
// Memory passes (the ops are bandwidth-bound): the training forward reads x three times (sum,
// squared deviations, y = a x + b) and writes y; the backward reads x and dy twice (the two sums,
// then dx) and writes dx. The largest ResNet-50 tensors (8x256x56x56 and the stem's 8x64x112x112,
// 25.7 MB in f32) do not fit the last-level cache, so a pass that starts where the previous one
// started finds nothing of it cached. Every pass here therefore runs in ONE OpenMP region over the
// same row split (each thread re-reads the rows it read itself), and consecutive passes walk their
// rows in opposite directions, so each pass begins with the rows the previous pass touched last
// (still in L2/L3). The sums stay bit-identical to the forward-only order: a pass walks its chunks
// backwards but each chunk's rows forwards, keeps every chunk's f32 sums in a scratch array (1/64
// of the data) and adds them into double in chunk order afterwards, exactly as before.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "ops/batchnorm_loops.hpp"
#include "ops/elem.hpp"
#include "parallel.hpp"

namespace kiln::cpu {
namespace {

constexpr std::int64_t kFlushRows = 64;

/// Which way a pass walks its thread's rows (see the header comment for why they alternate).
enum class Walk : std::uint8_t { forward, backward };

/// The rows one thread owns in every pass of one call: [begin, end), a contiguous 1/nt of them.
struct RowRange {
  std::int64_t begin, end;
  std::int64_t chunks() const { return (end - begin + kFlushRows - 1) / kFlushRows; }
};

RowRange rows_of_thread(std::int64_t rows) {
  const int t = omp_get_thread_num(), nt = omp_get_num_threads();
  return {rows * t / nt, rows * (t + 1) / nt};
}

/// Scratch of one call: the f32 sums of each chunk (Sums arrays of C per chunk) and, per thread,
/// Sums double partials of C; `teams` is the most threads the region may get. Thread t's chunks
/// start at slot begin / kFlushRows + t, so no two threads' chunks overlap whatever the split.
template <int Sums>
class ChunkSums {
 public:
  ChunkSums(std::int64_t rows, std::int64_t c, int teams)
      : c_(c),
        chunks_(new float[static_cast<std::size_t>((rows / kFlushRows + 1 + teams) * Sums * c)]),
        partial_(static_cast<std::size_t>(teams * Sums * c), 0.0) {}

  /// One pass over a thread's rows: add(row, acc_1, ..., acc_Sums) adds the row's C values into
  /// each of the chunk's f32 accumulators; chunks are visited in `walk` order, rows within a chunk
  /// always forwards. Then folds the chunk sums into the thread's double partials in chunk order.
  template <class AddRow>
  void pass(const RowRange& r, Walk walk, AddRow&& add) {
    const int t = omp_get_thread_num();
    float* mine = chunks_.get() + (r.begin / kFlushRows + t) * Sums * c_;
    const std::int64_t n = r.chunks();
    for (std::int64_t q = 0; q < n; ++q) {
      const std::int64_t j = walk == Walk::forward ? q : n - 1 - q;
      float* acc = mine + j * Sums * c_;
      std::fill_n(acc, Sums * c_, 0.0f);
      const std::int64_t first = r.begin + j * kFlushRows, last = std::min(r.end, first + kFlushRows);
      for (std::int64_t row = first; row < last; ++row) {
        if constexpr (Sums == 1) {
          add(row, acc);
        } else {
          add(row, acc, acc + c_);
        }
      }
    }
    double* p = partial_.data() + static_cast<std::size_t>(t) * Sums * c_;
    std::fill_n(p, Sums * c_, 0.0);
    for (std::int64_t j = 0; j < n; ++j) {
      const float* acc = mine + j * Sums * c_;
#pragma omp simd
      for (std::int64_t k = 0; k < Sums * c_; ++k) p[k] += acc[k];
    }
  }

  /// Channel k's total of sum s (0-based) over the team's partials, in thread order. Call after a
  /// barrier that follows every thread's pass().
  double total(int s, std::int64_t k) const {
    const int nt = omp_get_num_threads();
    double sum = 0.0;
    for (int t = 0; t < nt; ++t) sum += partial_[static_cast<std::size_t>((t * Sums + s) * c_ + k)];
    return sum;
  }

 private:
  std::int64_t c_;
  std::unique_ptr<float[]> chunks_;  // left uninitialised: every chunk is zeroed before it is summed
  std::vector<double> partial_;
};

/// Runs row(r) for a thread's rows in `walk` order.
template <class Row>
void each_row(const RowRange& r, Walk walk, Row&& row) {
  if (walk == Walk::forward) {
    for (std::int64_t i = r.begin; i < r.end; ++i) row(i);
  } else {
    for (std::int64_t i = r.end - 1; i >= r.begin; --i) row(i);
  }
}

/// y = x * a[c] + b[c] over every row (inference: one pass, no statistics).
template <class E>
void affine_rows(std::int64_t rows, std::int64_t c, typename E::T* y, const typename E::T* x, const float* a,
                 const float* b) {
  const auto row = [&](std::int64_t r) {
    const typename E::T* in = x + r * c;
    typename E::T* out = y + r * c;
#pragma omp simd
    for (std::int64_t k = 0; k < c; ++k) out[k] = E::store(E::load(in[k]) * a[k] + b[k]);
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
  const bool parallel = rows * c > kParallelMinElements;
  const int teams = parallel ? omp_get_max_threads() : 1;
  std::vector<float> m(static_cast<std::size_t>(c)), a(static_cast<std::size_t>(c)), b(static_cast<std::size_t>(c));
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* in = static_cast<const T*>(x.data());
    T* out = static_cast<T*>(y.data());
    ChunkSums<1> sums(rows, c, teams);  // the sum of x, then of (x - mean)^2
    float* mk = m.data();
#pragma omp parallel num_threads(teams) if (parallel)
    {
      const RowRange mine = rows_of_thread(rows);
      // Pass 1, backwards: x's producer (the convolution) wrote it forwards, so its end is cached.
      sums.pass(mine, Walk::backward, [&](std::int64_t r, float* acc) {
        const T* p = in + r * c;
#pragma omp simd
        for (std::int64_t k = 0; k < c; ++k) acc[k] += E::load(p[k]);
      });
#pragma omp barrier
#pragma omp for schedule(static)
      for (std::int64_t k = 0; k < c; ++k) mk[k] = static_cast<float>(sums.total(0, k) / count);
      // Pass 2, forwards (the implicit barrier above: every mean is known and every thread has
      // read the partials pass 2 overwrites).
      sums.pass(mine, Walk::forward, [&](std::int64_t r, float* acc) {
        const T* p = in + r * c;
#pragma omp simd
        for (std::int64_t k = 0; k < c; ++k) {
          const float v = E::load(p[k]) - mk[k];
          acc[k] += v * v;
        }
      });
#pragma omp barrier
#pragma omp for schedule(static)
      for (std::int64_t k = 0; k < c; ++k) {
        const float v = static_cast<float>(sums.total(0, k) / count);
        mean[k] = m[k];
        var[k] = v;
        a[k] = gamma[k] / std::sqrt(v + d.eps);
        b[k] = beta[k] - m[k] * a[k];
      }
      // Pass 3, backwards: ends at y's first rows, which the next op (a ReLU) reads first.
      const float *ak = a.data(), *bk = b.data();
      each_row(mine, Walk::backward, [&](std::int64_t r) {
        const T* p = in + r * c;
        T* o = out + r * c;
#pragma omp simd
        for (std::int64_t k = 0; k < c; ++k) o[k] = E::store(E::load(p[k]) * ak[k] + bk[k]);
      });
    }
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
  const bool parallel = rows * c > kParallelMinElements;
  const int teams = parallel ? omp_get_max_threads() : 1;
  // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), as scale (dy - shift - (x - mean) slope).
  std::vector<float> scale(static_cast<std::size_t>(c)), shift(static_cast<std::size_t>(c)),
      slope(static_cast<std::size_t>(c));
  with_float_dtype(d.dtype, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    const T* xs = static_cast<const T*>(x.data());
    const T* gs = static_cast<const T*>(dy.data());
    T* out = static_cast<T*>(dx.data());
    ChunkSums<2> sums(rows, c, teams);  // sum of dy, sum of dy (x - mean)
#pragma omp parallel num_threads(teams) if (parallel)
    {
      const RowRange mine = rows_of_thread(rows);
      // Pass 1, backwards: dy's producer wrote it forwards, so its end is cached.
      sums.pass(mine, Walk::backward, [&](std::int64_t r, float* a1, float* a2) {
        const T* xp = xs + r * c;
        const T* gp = gs + r * c;
#pragma omp simd
        for (std::int64_t k = 0; k < c; ++k) {
          const float g = E::load(gp[k]);
          a1[k] += g;
          a2[k] += g * (E::load(xp[k]) - mean[k]);
        }
      });
#pragma omp barrier
#pragma omp for schedule(static)
      for (std::int64_t k = 0; k < c; ++k) {
        const float sum_dy = static_cast<float>(sums.total(0, k));
        const float sum_dy_xhat = static_cast<float>(sums.total(1, k)) * invstd[k];
        dgamma[k] = sum_dy_xhat;
        dbeta[k] = sum_dy;
        scale[k] = gamma[k] * invstd[k];
        shift[k] = sum_dy * inv_count;
        slope[k] = sum_dy_xhat * inv_count * invstd[k];
      }
      // Pass 2, forwards (implicit barrier above).
      const float *sk = scale.data(), *mk = shift.data(), *lk = slope.data();
      each_row(mine, Walk::forward, [&](std::int64_t r) {
        const T* xp = xs + r * c;
        const T* gp = gs + r * c;
        T* op = out + r * c;
#pragma omp simd
        for (std::int64_t k = 0; k < c; ++k) {
          op[k] = E::store(sk[k] * (E::load(gp[k]) - mk[k] - (E::load(xp[k]) - mean[k]) * lk[k]));
        }
      });
    }
  });
}

}  // namespace kiln::cpu
