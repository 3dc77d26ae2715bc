// Plain-C++ decisions of the cuDNN ops, kept apart from the calls so CI tests them without a GPU:
// how a cuDNN 9 status is classified and which batch-norm mode a plan starts in.
//
// Decisions:
// - cuDNN 9 returns sub-codes (CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002, ..._SHARED_MEMORY_
//   INSUFFICIENT = 3010, ...), so "not supported" is a category test (CUDNN_STATUS_CATEGORY),
//   never `== CUDNN_STATUS_NOT_SUPPORTED`.
// - Batch-norm starts SPATIAL_PERSISTENT only for nhwc f16. bf16 starts SPATIAL until persistent
//   has been seen to work on a GPU (kBf16PersistentBatchNormVerified); either falls back to
//   SPATIAL for good when cuDNN says not supported.
#pragma once

#include <cudnn.h>

#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// Whether `s` is CUDNN_STATUS_NOT_SUPPORTED or one of its cuDNN 9 sub-codes (3001..3999).
bool cudnn_not_supported(cudnnStatus_t s) noexcept;

/// Set to true once SPATIAL_PERSISTENT batch-norm in bf16 has passed the conformance suite on a
/// GPU (docs/gpu-check.md); until then bf16 plans start in SPATIAL.
inline constexpr bool kBf16PersistentBatchNormVerified = false;

/// The mode a batch-norm plan starts in for data of `dtype` in `layout`.
cudnnBatchNormMode_t batchnorm_start_mode(DType dtype, Layout layout) noexcept;

/// Whether `status`, returned by a batch-norm call in `mode`, means: drop to SPATIAL and rerun.
bool batchnorm_falls_back(cudnnStatus_t status, cudnnBatchNormMode_t mode) noexcept;

}  // namespace kiln::cuda
