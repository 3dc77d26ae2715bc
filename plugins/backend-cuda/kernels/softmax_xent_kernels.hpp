// Launchers of softmax cross-entropy with label smoothing (softmax_xent_kernels.cu), all f32.
//
// The loss statistics are reduced in two passes so the result is deterministic (no float atomics):
// one block per row writes that row's loss and 0/1 "argmax == label" into `row_stats`, then one
// block sums those rows in a fixed order (in double) and adds the totals to stats[0], stats[1].
// Labels live on the device and are not read by the host (that would need a synchronize), so a
// label outside [0, K) makes its row's loss NaN -- the trainer's loss check then stops the run --
// and its dlogits row NaN, instead of being reported by index as the cpu backend does.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace kiln::cuda::kernels {

/// Device scratch softmax_xent_forward needs for `rows` rows, in bytes.
inline std::size_t softmax_xent_workspace_bytes(std::int64_t rows) {
  return static_cast<std::size_t>(rows) * 2 * sizeof(float);
}

/// probs (rows, classes) = softmax(logits); stats[0] += sum of smoothed losses, stats[1] += rows
/// whose first maximum is the label. row_stats: softmax_xent_workspace_bytes(rows) of scratch.
void softmax_xent_forward(float* probs, float* stats, float* row_stats, const float* logits,
                          const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                          float label_smoothing, cudaStream_t stream);

/// dlogits = scale * (probs - ((1 - s) onehot(label) + s / classes)).
void softmax_xent_backward(float* dlogits, const float* probs, const std::int32_t* labels,
                           std::int64_t rows, std::int64_t classes, float label_smoothing,
                           float scale, cudaStream_t stream);

/// count[0] += rows whose label is among the k highest logits (a class ranks above the label when
/// its logit is greater, or equal with a lower index). One block per row counts the classes above
/// its label; thread 0 adds 1 with an atomic. The count is a whole number, exact in f32 below 2^24
/// in any order, so the result does not depend on the blocks' order. A label outside [0, K) or
/// with a NaN logit does not count (its loss is NaN already: softmax_xent_forward).
void top_k_hits(float* count, const float* logits, const std::int32_t* labels, std::int64_t rows,
                std::int64_t classes, std::int64_t k, cudaStream_t stream);

}  // namespace kiln::cuda::kernels
