// The synchronised batch-norm kernels (f32/f16/bf16 storage, NCHW or nhwc), with the cpu
// backend's arithmetic (plugins/backend-cpu/ops/batchnorm_sync_loops.cpp): per-channel sums in
// f64, the mean as sum / count in f64 and the variance as a second pass over (x - mean)^2 (no
// cancellation), dy * (x - mean) with the difference taken in f32 as the cpu loop does, and the
// element-wise dx from three f32 per-channel coefficients computed as the cpu loop computes them.
//
// Reductions are the two-pass grid reduction of batchnorm_sync_geometry.hpp: partials_*_kernel
// writes one f64 partial per (sum, channel, chunk), finish_kernel adds a channel's partials in a
// fixed order (one warp per channel) and hands the sums to a per-op Finish. No atomics, so the
// results are the same run to run. NCHW blocks are one channel x one chunk, 256 threads striding
// over the chunk's contiguous (o, i) positions; nhwc blocks are 32 neighbouring channels x 8 rows,
// so each row step reads 32 consecutive values (coalesced) and rows are summed through shared
// memory. f64 accumulation costs nothing on an H200 (these kernels are bound by memory); on a
// GPU with slow f64 it would be the first thing to revisit.
#include "kernels/batchnorm_sync_kernels.hpp"

#include "cuda_check.hpp"
#include "kernels/block_reduce.cuh"
#include "kernels/device_elem.cuh"
#include "kernels/launch_geometry.hpp"

namespace kiln::cuda::kernels {
namespace {

// ---- per-element terms of the first pass: centre(c) is read once per channel, add() per value --

/// sum(x).
template <class T>
struct SumTerm {
  static constexpr int kSums = 1;
  const T* x;
  __device__ double centre(std::int64_t) const { return 0.0; }
  __device__ void add(double* acc, std::int64_t at, double) const { acc[0] += Elem<T>::load(x[at]); }
};

/// sum((x - mean)^2) around the f64 mean of the first pass, in f64 as the cpu loop.
template <class T>
struct SquaredDeviationTerm {
  static constexpr int kSums = 1;
  const T* x;
  const double* mean;
  __device__ double centre(std::int64_t c) const { return mean[c]; }
  __device__ void add(double* acc, std::int64_t at, double m) const {
    const double v = static_cast<double>(Elem<T>::load(x[at])) - m;
    acc[0] += v * v;
  }
};

/// sum(dy) and sum(dy * (x - mean)); mean is f32 and the difference is taken in f32 (the cpu
/// loop's order of rounding), then multiplied in f64.
template <class T>
struct GradTerm {
  static constexpr int kSums = 2;
  const T* dy;
  const T* x;
  const float* mean;
  __device__ double centre(std::int64_t c) const { return mean[c]; }
  __device__ void add(double* acc, std::int64_t at, double m) const {
    const double g = Elem<T>::load(dy[at]);
    acc[0] += g;
    acc[1] += g * static_cast<double>(Elem<T>::load(x[at]) - static_cast<float>(m));
  }
};

// ---- first pass -----------------------------------------------------------------------------

/// NCHW: block (c, chunk) sums the chunk's positions j of channel c, (o, i) = (j / inner, j % inner).
template <class Term>
__global__ void __launch_bounds__(kChannelReduceThreads)
    partials_nchw_kernel(double* partial, Term term, ChannelWalk w, std::int64_t per_chunk) {
  const std::int64_t c = blockIdx.x, chunk = blockIdx.y, chunks = gridDim.y;
  const std::int64_t values = w.outer * w.inner;
  const std::int64_t end = chunk_end(chunk, per_chunk, values);
  const double centre = term.centre(c);
  double acc[Term::kSums] = {};
  const std::int64_t step_o = blockDim.x / w.inner, step_i = blockDim.x % w.inner;
  std::int64_t j = chunk * per_chunk + threadIdx.x;
  PlanarCursor p = planar_cursor(j, w.inner);
  for (; j < end; j += blockDim.x) {
    term.add(acc, walk_offset(p.o, c, p.i, w.c, w.inner), centre);
    planar_advance(p, step_o, step_i, w.inner);
  }
#pragma unroll
  for (int s = 0; s < Term::kSums; ++s) {
    const double total = block_sum(acc[s]);  // every thread calls it (it synchronises)
    if (threadIdx.x == 0) partial[partial_slot(s, c, chunk, w.c, chunks)] = total;
  }
}

/// nhwc: block (tile, chunk) sums rows [begin, end) of channels tile*32 .. tile*32 + 31.
template <class Term>
__global__ void __launch_bounds__(kChannelReduceThreads)
    partials_nhwc_kernel(double* partial, Term term, ChannelWalk w, std::int64_t per_chunk) {
  __shared__ double rows_sum[Term::kSums][kNhwcRowTile][kNhwcChannelTile];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kNhwcChannelTile + threadIdx.x;
  const std::int64_t chunk = blockIdx.y, chunks = gridDim.y;
  const std::int64_t end = chunk_end(chunk, per_chunk, w.outer);
  double acc[Term::kSums] = {};
  if (c < w.c) {
    const double centre = term.centre(c);
    for (std::int64_t row = chunk * per_chunk + threadIdx.y; row < end; row += kNhwcRowTile) {
      term.add(acc, walk_offset(row, c, 0, w.c, 1), centre);
    }
  }
#pragma unroll
  for (int s = 0; s < Term::kSums; ++s) rows_sum[s][threadIdx.y][threadIdx.x] = acc[s];
  __syncthreads();
  if (threadIdx.y == 0 && c < w.c) {
#pragma unroll
    for (int s = 0; s < Term::kSums; ++s) {
      double total = 0.0;
      for (unsigned r = 0; r < kNhwcRowTile; ++r) total += rows_sum[s][r][threadIdx.x];
      partial[partial_slot(s, c, chunk, w.c, chunks)] = total;
    }
  }
}

// ---- second pass: one warp per channel adds its partials, then the op's Finish --------------------

template <int kSums, class Finish>
__global__ void finish_kernel(Finish finish, const double* partial, std::int64_t channels, std::int64_t chunks) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = grid_stride() / 32;
  // The loop bound is the same for all lanes of a warp, so the shuffles never diverge.
  for (std::int64_t c = global_thread() / 32; c < channels; c += warps) {
    double sums[kSums];
#pragma unroll
    for (int s = 0; s < kSums; ++s) {
      const double* p = partial + partial_slot(s, c, 0, channels, chunks);
      double v = 0.0;
      for (std::int64_t k = lane; k < chunks; k += 32) v += p[k];
      sums[s] = warp_sum(v);
    }
    if (lane == 0) finish(c, sums);
  }
}

/// batchnorm_stats, first pass done: the f64 mean, kept for the second pass.
struct MeanFinish {
  double* mean;
  double count;
  __device__ void operator()(std::int64_t c, const double* sums) const { mean[c] = sums[0] / count; }
};

/// batchnorm_stats, second pass done: the f32 mean and biased variance.
struct VarianceFinish {
  float* mean;
  float* var;
  const double* mean_f64;
  double count;
  __device__ void operator()(std::int64_t c, const double* sums) const {
    mean[c] = static_cast<float>(mean_f64[c]);
    var[c] = static_cast<float>(sums[0] / count);
  }
};

/// batchnorm_backward_reduce: sum(dy) and sum(dy (x - mean)) * invstd.
struct GradFinish {
  float* sum_dy;
  float* sum_dy_xhat;
  const float* invstd;
  __device__ void operator()(std::int64_t c, const double* sums) const {
    sum_dy[c] = static_cast<float>(sums[0]);
    sum_dy_xhat[c] = static_cast<float>(sums[1] * invstd[c]);
  }
};

template <class Term>
void launch_partials(double* partial, const Term& term, const ChannelWalk& w, const ChannelReduceGeometry& g,
                     cudaStream_t stream) {
  const dim3 grid(g.grid_x, g.grid_y), block(g.block_x, g.block_y);
  if (w.layout == Layout::nhwc) {
    partials_nhwc_kernel<Term><<<grid, block, 0, stream>>>(partial, term, w, g.per_chunk);
  } else {
    partials_nchw_kernel<Term><<<grid, block, 0, stream>>>(partial, term, w, g.per_chunk);
  }
}

template <int kSums, class Finish>
void launch_finish(const Finish& finish, const double* partial, const ChannelWalk& w, std::int64_t chunks,
                   cudaStream_t stream) {
  const LaunchGeometry geo = grid_stride_geometry(w.c * 32);
  finish_kernel<kSums, Finish><<<geo.grid, geo.block, 0, stream>>>(finish, partial, w.c, chunks);
}

// ---- batchnorm_backward_elemt -----------------------------------------------------------------

/// The cpu loop's per-channel coefficients: k = gamma invstd, mean_dy = sum_dy / count and
/// slope = sum_dy_xhat / count * invstd, stored as coef[c], coef[C + c], coef[2C + c].
__global__ void elemt_coefficients_kernel(float* coef, const float* gamma, const float* invstd, const float* sum_dy,
                                          const float* sum_dy_xhat, std::int64_t channels, double inv_count) {
  for (std::int64_t c = global_thread(); c < channels; c += grid_stride()) {
    coef[c] = gamma[c] * invstd[c];
    coef[channels + c] = static_cast<float>(sum_dy[c] * inv_count);
    coef[2 * channels + c] = static_cast<float>(sum_dy_xhat[c] * inv_count * invstd[c]);
  }
}

/// dx = k (dy - mean_dy - (x - mean) slope) per element; Index is 32-bit where the tensor allows
/// (fits_32bit_index), which makes finding an element's channel cheaper.
template <class T, class Index>
__global__ void elemt_kernel(T* dx, const T* dy, const T* x, const float* coef, const float* mean, Index total,
                             Index channels, Index inner) {
  using E = Elem<T>;
  const Index stride = static_cast<Index>(grid_stride());
  for (Index at = static_cast<Index>(global_thread()); at < total; at += stride) {
    const Index c = element_channel(at, channels, inner);
    const float xc = E::load(x[at]) - mean[c];
    dx[at] = E::store(coef[c] * (E::load(dy[at]) - coef[channels + c] - xc * coef[2 * channels + c]));
  }
}

}  // namespace

void batchnorm_stats(float* mean, float* var, const void* x, const ChannelWalk& w, DType dtype, void* workspace,
                     cudaStream_t stream) {
  const ChannelReduceGeometry g = channel_reduce_geometry(w);
  if (g.chunks == 0) return;
  auto* partial = static_cast<double*>(workspace);
  double* mean_f64 = partial + partial_slot(1, 0, 0, w.c, g.chunks);  // after the one sum's partials
  const double count = static_cast<double>(w.per_channel());
  with_float_type(dtype, "batchnorm_stats", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    launch_partials(partial, SumTerm<T>{xs}, w, g, stream);
    check_last_launch("batchnorm_stats (sums)");
    launch_finish<1>(MeanFinish{mean_f64, count}, partial, w, g.chunks, stream);
    check_last_launch("batchnorm_stats (mean)");
    launch_partials(partial, SquaredDeviationTerm<T>{xs, mean_f64}, w, g, stream);
    check_last_launch("batchnorm_stats (squared deviations)");
    launch_finish<1>(VarianceFinish{mean, var, mean_f64, count}, partial, w, g.chunks, stream);
    check_last_launch("batchnorm_stats (variance)");
  });
}

void batchnorm_backward_reduce(float* sum_dy, float* sum_dy_xhat, const void* dy, const void* x, const float* mean,
                               const float* invstd, const ChannelWalk& w, DType dtype, void* workspace,
                               cudaStream_t stream) {
  const ChannelReduceGeometry g = channel_reduce_geometry(w);
  if (g.chunks == 0) return;
  auto* partial = static_cast<double*>(workspace);
  with_float_type(dtype, "batchnorm_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    launch_partials(partial, GradTerm<T>{static_cast<const T*>(dy), static_cast<const T*>(x), mean}, w, g, stream);
    check_last_launch("batchnorm_backward_reduce (sums)");
    launch_finish<2>(GradFinish{sum_dy, sum_dy_xhat, invstd}, partial, w, g.chunks, stream);
    check_last_launch("batchnorm_backward_reduce (finish)");
  });
}

void batchnorm_backward_elemt(void* dx, const void* dy, const void* x, const float* gamma, const float* mean,
                              const float* invstd, const float* sum_dy, const float* sum_dy_xhat,
                              std::int64_t count, const ChannelWalk& w, DType dtype, void* workspace,
                              cudaStream_t stream) {
  const std::int64_t total = w.total();
  if (total <= 0 || count <= 0) return;
  auto* coef = static_cast<float*>(workspace);
  const LaunchGeometry per_channel = grid_stride_geometry(w.c);
  elemt_coefficients_kernel<<<per_channel.grid, per_channel.block, 0, stream>>>(
      coef, gamma, invstd, sum_dy, sum_dy_xhat, w.c, 1.0 / static_cast<double>(count));
  check_last_launch("batchnorm_backward_elemt (coefficients)");
  with_float_type(dtype, "batchnorm_backward_elemt", [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dx);
    const T* g = static_cast<const T*>(dy);
    const T* xs = static_cast<const T*>(x);
    const LaunchGeometry geo = grid_stride_geometry(total);
    if (fits_32bit_index(total)) {
      elemt_kernel<T, std::uint32_t><<<geo.grid, geo.block, 0, stream>>>(
          out, g, xs, coef, mean, static_cast<std::uint32_t>(total), static_cast<std::uint32_t>(w.c),
          static_cast<std::uint32_t>(w.inner));
    } else {
      elemt_kernel<T, std::int64_t><<<geo.grid, geo.block, 0, stream>>>(out, g, xs, coef, mean, total, w.c, w.inner);
    }
    check_last_launch("batchnorm_backward_elemt");
  });
}

}  // namespace kiln::cuda::kernels
