// cuDNN status classification and batch-norm modes (dnn_policy.hpp).
#include "dnn/dnn_policy.hpp"

namespace kiln::cuda {

bool cudnn_not_supported(cudnnStatus_t s) noexcept {
  return CUDNN_STATUS_CATEGORY(static_cast<int>(s)) == CUDNN_STATUS_NOT_SUPPORTED;
}

cudnnBatchNormMode_t batchnorm_start_mode(DType dtype, Layout layout) noexcept {
  if (layout != Layout::nhwc) return CUDNN_BATCHNORM_SPATIAL;
  if (dtype == DType::f16) return CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  if (dtype == DType::bf16 && kBf16PersistentBatchNormVerified) return CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  return CUDNN_BATCHNORM_SPATIAL;
}

bool batchnorm_falls_back(cudnnStatus_t status, cudnnBatchNormMode_t mode) noexcept {
  return mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT && cudnn_not_supported(status);
}

}  // namespace kiln::cuda
