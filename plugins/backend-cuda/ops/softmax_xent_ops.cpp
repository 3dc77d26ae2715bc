// CudaBackend softmax cross-entropy with label smoothing: validate (kernel_validate.hpp), then
// launch on the compute stream (kernels/softmax_xent_kernels.hpp). The per-row loss scratch of
// the deterministic two-pass reduction comes from workspace(); dropping it after the launches is
// safe because the allocator only hands it to work enqueued later on the same stream.
#include "cuda_backend.hpp"
#include "kernels/softmax_xent_kernels.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::softmax_xent_forward(const Tensor& probs, const Tensor& stats,
                                       const Tensor& logits, const Tensor& labels,
                                       float label_smoothing) {
  const kernels::RowsClasses rc =
      validate_softmax_xent_forward(probs, stats, logits, labels, label_smoothing);
  if (rc.rows == 0) return;
  const Tensor scratch = workspace(kernels::softmax_xent_workspace_bytes(rc.rows));
  kernels::softmax_xent_forward(probs.data_as<float>(), stats.data_as<float>(),
                                static_cast<float*>(scratch.data()), logits.data_as<float>(),
                                labels.data_as<std::int32_t>(), rc.rows, rc.classes,
                                label_smoothing, compute_stream());
}

void CudaBackend::softmax_xent_backward(const Tensor& dlogits, const Tensor& probs,
                                        const Tensor& labels, float label_smoothing, float scale) {
  const kernels::RowsClasses rc =
      validate_softmax_xent_backward(dlogits, probs, labels, label_smoothing);
  kernels::softmax_xent_backward(dlogits.data_as<float>(), probs.data_as<float>(),
                                 labels.data_as<std::int32_t>(), rc.rows, rc.classes,
                                 label_smoothing, scale, compute_stream());
}

void CudaBackend::top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels, std::int64_t k) {
  const kernels::RowsClasses rc = validate_top_k_hits(count, logits, labels, k);
  kernels::top_k_hits(count.data_as<float>(), logits.data_as<float>(), labels.data_as<std::int32_t>(), rc.rows,
                      rc.classes, k, compute_stream());
}

}  // namespace kiln::cuda
