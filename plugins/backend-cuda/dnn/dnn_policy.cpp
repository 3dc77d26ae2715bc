// cuDNN status classification, batch-norm modes and convolution algorithm policy (dnn_policy.hpp).
#include "dnn/dnn_policy.hpp"

#include <algorithm>

namespace kiln::cuda {

bool cudnn_not_supported(cudnnStatus_t s) noexcept {
  return CUDNN_STATUS_CATEGORY(static_cast<int>(s)) == CUDNN_STATUS_NOT_SUPPORTED;
}

Layout automatic_activation_layout(DType dtype, bool allow_tf32) noexcept {
  const bool tensor_cores = dtype == DType::f16 || dtype == DType::bf16 || (dtype == DType::f32 && allow_tf32);
  return tensor_cores ? Layout::nhwc : Layout::row_major;
}

cudnnBatchNormMode_t batchnorm_start_mode(DType dtype, Layout layout) noexcept {
  (void)dtype;  // the same rule for f32, f16 and bf16 (see dnn_policy.hpp)
  return layout == Layout::nhwc ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
}

bool batchnorm_falls_back(cudnnStatus_t status, cudnnBatchNormMode_t mode) noexcept {
  return mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT && cudnn_not_supported(status);
}

bool conv_algo_allowed(ConvDirection direction, int algo, MathMode math) noexcept {
  if (math != MathMode::fp32) return true;
  switch (direction) {
    case ConvDirection::forward:
      return algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT && algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
             algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD && algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case ConvDirection::backward_data:
      return algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT && algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
             algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD &&
             algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    case ConvDirection::backward_filter:
      return algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT && algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
             algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
  }
  return true;
}

bool conv_retry_on(cudnnStatus_t status) noexcept {
  const int category = CUDNN_STATUS_CATEGORY(static_cast<int>(status));
  // Both are reported before anything runs; EXECUTION_FAILED is not retried: a kernel may have
  // written part of the output (dw accumulates), or a sticky CUDA error is being reported.
  return category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_INTERNAL_ERROR;
}

std::optional<AlgoChoice> next_conv_candidate(const std::vector<AlgoChoice>& ranked, const std::vector<int>& failed) {
  for (const AlgoChoice& c : ranked) {
    if (std::find(failed.begin(), failed.end(), c.algo) == failed.end()) return c;
  }
  return std::nullopt;
}

}  // namespace kiln::cuda
