// Softmax cross-entropy with label smoothing (f32), the cpu backend's math on the GPU, and top-k hits:
//   lse = max + log(sum exp(x - max));  probs = exp(x - lse);
//   loss = lse - (1 - s) x_label - (s / K) sum x;  dlogits = scale (probs - t).
// Forward: one block per row (block size from row_block_size) finds the first maximum, the
// exponential sum and sum x with block reductions, writes the row's probs and its (loss,
// correct) pair; a one-block pass then sums the pairs in double in a fixed order and adds them to
// stats, so the statistics are bit-identical run to run. Backward is element-wise over (B, K).
#include "kernels/softmax_xent_kernels.hpp"

#include "cuda_check.hpp"
#include "kernels/block_reduce.cuh"
#include "kernels/device_elem.cuh"
#include "kernels/launch_geometry.hpp"

namespace kiln::cuda::kernels {
namespace {

constexpr unsigned kTotalsBlock = 256;

// Launched with row_block_size(classes) threads, up to kMaxRowBlock.
__global__ void __launch_bounds__(kMaxRowBlock) softmax_xent_rows_kernel(float* probs, float* row_stats, const float* logits,
                                         const std::int32_t* labels, std::int64_t classes,
                                         float on_weight, float uniform_weight) {
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  float* p = probs + row * classes;

  MaxAt best{-__int_as_float(0x7f800000), 0x7fffffff};
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
    best = max_at_combine(best, MaxAt{x[k], static_cast<int>(k)});
  }
  best = block_max_at(best);

  float sum_exp = 0.0f, sum_x = 0.0f;
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
    const float e = expf(x[k] - best.value);
    p[k] = e;
    sum_exp += e;
    sum_x += x[k];
  }
  sum_exp = block_sum(sum_exp);
  sum_x = block_sum(sum_x);
  const float inv_sum = 1.0f / sum_exp;
  // Each thread rescales the elements it wrote itself: no barrier needed.
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) p[k] *= inv_sum;

  if (threadIdx.x == 0) {
    const std::int32_t label = labels[row];
    const bool valid = label >= 0 && label < classes;
    const float lse = best.value + logf(sum_exp);
    row_stats[2 * row] = valid ? lse - on_weight * x[label] - uniform_weight * sum_x
                               : __int_as_float(0x7fc00000);  // NaN: see the launcher header
    row_stats[2 * row + 1] = valid && best.index == label ? 1.0f : 0.0f;
  }
}

__global__ void __launch_bounds__(kTotalsBlock) softmax_xent_totals_kernel(float* stats, const float* row_stats, std::int64_t rows) {
  double loss = 0.0, correct = 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_stats[2 * r];
    correct += row_stats[2 * r + 1];
  }
  loss = block_sum(loss);
  correct = block_sum(correct);
  if (threadIdx.x == 0) {
    stats[0] += static_cast<float>(loss);
    stats[1] += static_cast<float>(correct);
  }
}

__global__ void softmax_xent_backward_kernel(float* dlogits, const float* probs,
                                             const std::int32_t* labels, std::int64_t rows,
                                             std::int64_t classes, float scale, float uniform,
                                             float on) {
  const std::int64_t n = rows * classes;
  for (std::int64_t i = global_thread(); i < n; i += grid_stride()) {
    const std::int64_t row = i / classes;
    const std::int64_t k = i - row * classes;
    const std::int32_t label = labels[row];
    float d = scale * probs[i] - uniform;
    if (k == label) d -= on;
    if (label < 0 || label >= classes) d = __int_as_float(0x7fc00000);
    dlogits[i] = d;
  }
}

// Launched with row_block_size(classes) threads, one block per row.
__global__ void __launch_bounds__(kMaxRowBlock) top_k_hits_kernel(float* count, const float* logits,
                                                                  const std::int32_t* labels, std::int64_t classes,
                                                                  std::int64_t k) {
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  const std::int32_t label = labels[row];
  const bool valid = label >= 0 && label < classes && !isnan(x[label]);
  const float mine = valid ? x[label] : 0.0f;
  float above = 0.0f;  // a whole number of classes, exact in f32
  if (valid) {
    for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      above += (x[c] > mine || (x[c] == mine && c < label)) ? 1.0f : 0.0f;
    }
  }
  above = block_sum(above);  // every thread of the block takes part, valid row or not
  if (threadIdx.x == 0 && valid && above < static_cast<float>(k)) atomicAdd(count, 1.0f);
}

}  // namespace

void top_k_hits(float* count, const float* logits, const std::int32_t* labels, std::int64_t rows,
                std::int64_t classes, std::int64_t k, cudaStream_t stream) {
  if (rows <= 0) return;
  top_k_hits_kernel<<<static_cast<unsigned>(rows), row_block_size(classes), 0, stream>>>(count, logits, labels,
                                                                                          classes, k);
  check_last_launch("top_k_hits");
}

void softmax_xent_forward(float* probs, float* stats, float* row_stats, const float* logits,
                          const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                          float label_smoothing, cudaStream_t stream) {
  if (rows <= 0) return;
  const float on_weight = 1.0f - label_smoothing;
  const float uniform_weight = label_smoothing / static_cast<float>(classes);
  softmax_xent_rows_kernel<<<static_cast<unsigned>(rows), row_block_size(classes), 0, stream>>>(
      probs, row_stats, logits, labels, classes, on_weight, uniform_weight);
  check_last_launch("softmax_xent_forward (rows)");
  softmax_xent_totals_kernel<<<1, kTotalsBlock, 0, stream>>>(stats, row_stats, rows);
  check_last_launch("softmax_xent_forward (totals)");
}

void softmax_xent_backward(float* dlogits, const float* probs, const std::int32_t* labels,
                           std::int64_t rows, std::int64_t classes, float label_smoothing,
                           float scale, cudaStream_t stream) {
  if (rows <= 0 || classes <= 0) return;
  const float uniform = scale * label_smoothing / static_cast<float>(classes);
  const float on = scale * (1.0f - label_smoothing);
  const LaunchGeometry g = grid_stride_geometry(rows * classes);
  softmax_xent_backward_kernel<<<g.grid, g.block, 0, stream>>>(dlogits, probs, labels, rows,
                                                               classes, scale, uniform, on);
  check_last_launch("softmax_xent_backward");
}

}  // namespace kiln::cuda::kernels
