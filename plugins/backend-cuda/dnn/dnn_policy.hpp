// Plain-C++ decisions of the cuDNN ops, kept apart from the calls so CI tests them without a GPU:
// how a cuDNN 9 status is classified, which activation layout "auto" means, which batch-norm mode
// a plan starts in, which convolution algorithms an fp32 plan may use, and which candidate a
// convolution falls back to when the one cuDNN's heuristics ranked first is refused at run time.
//
// Decisions:
// - activation_layout = "auto" is channels-last wherever tensor cores run the convolutions: f16,
//   bf16, and f32 with allow_tf32 (an H200 on 2026-12-04, ResNet-50 b256 with TF32: 3,162 img/s
//   channels-last against 2,125 NCHW; PyTorch channels_last 3,164). Strict f32 stays NCHW: its
//   channels-last backward-data kernels took 4x as long (347 against 83 ms per step), and the
//   run trained 459 img/s against 787.
// - cuDNN 9 returns sub-codes (CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002, ..._SHARED_MEMORY_
//   INSUFFICIENT = 3010, ...), so "not supported" is a category test (CUDNN_STATUS_CATEGORY),
//   never `== CUDNN_STATUS_NOT_SUPPORTED`.
// - Batch-norm starts SPATIAL_PERSISTENT for nhwc data of every dtype (as PyTorch's cuDNN path
//   does for channels_last training) and falls back to SPATIAL for good when cuDNN says not
//   supported. bf16 started SPATIAL until a GPU run (H200, cuDNN 9.19, 2026-12-04) measured what
//   that costs: cuDNN's SPATIAL NHWC bf16 kernels ran at 33 GB/s, 93% of a ResNet-50 step (279
//   images/s against fp16's 6000). nhwc f32 (TF32 under the auto layout, or `activation_layout =
//   "nhwc"`) follows the same rule, which cuDNN 9.19 accepts on an H200.
// - f32 plans may use the FFT and Winograd convolution algorithms (MathMode::fp32_transforms, the
//   default `[backend] conv_transforms = true`), as PyTorch does and as the cpu backend's Winograd
//   does: on the H200 that took ResNet-50 fp32 from 787 to 905 img/s (1,015 with cudnn_benchmark,
//   PyTorch 1,057), and the conformance suite holds them to the f32 tolerance. conv_transforms =
//   false gives MathMode::fp32, which never uses them: direct/GEMM algorithms only, for results
//   that do not carry the transforms' extra rounding. tf32 and tensor-op plans may always use them
//   (their own tolerance is 1e-3 or more).
// - A convolution algorithm refused when it runs (a not-supported or internal-error status
//   returned by the cuDNN call, both reported before any kernel runs) is retried with the next
//   usable candidate in heuristic order; other statuses (bad parameters, execution failures, which
//   may have written part of an accumulated dw) are errors at once. Only refusals cuDNN reports
//   synchronously are caught: a kernel that faults later surfaces at the next synchronize.
#pragma once

#include <optional>
#include <vector>

#include <cudnn.h>

#include "dnn/algo_key.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// The activation layout of `[backend] activation_layout = "auto"` for `dtype`: channels-last
/// wherever tensor cores do the convolutions (f16, bf16, and f32 with TF32 allowed), NCHW for
/// strict f32.
Layout automatic_activation_layout(DType dtype, bool allow_tf32) noexcept;

/// Whether `s` is CUDNN_STATUS_NOT_SUPPORTED or one of its cuDNN 9 sub-codes (3001..3999).
bool cudnn_not_supported(cudnnStatus_t s) noexcept;

/// The mode a batch-norm plan starts in for data of `dtype` in `layout`.
cudnnBatchNormMode_t batchnorm_start_mode(DType dtype, Layout layout) noexcept;

/// Whether `status`, returned by a batch-norm call in `mode`, means: drop to SPATIAL and rerun.
bool batchnorm_falls_back(cudnnStatus_t status, cudnnBatchNormMode_t mode) noexcept;

/// Whether a plan in `math` may use algorithm `algo` (a cudnnConvolution{Fwd,BwdData,BwdFilter}
/// Algo_t value, by `direction`): not FFT or Winograd in MathMode::fp32.
bool conv_algo_allowed(ConvDirection direction, int algo, MathMode math) noexcept;

/// Whether a convolution call that returned `status` should be retried with the next candidate.
bool conv_retry_on(cudnnStatus_t status) noexcept;

/// The first of `ranked` (heuristic order) whose algorithm is not in `failed`; nullopt if none.
std::optional<AlgoChoice> next_conv_candidate(const std::vector<AlgoChoice>& ranked, const std::vector<int>& failed);

}  // namespace kiln::cuda
