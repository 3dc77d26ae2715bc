// Argument checks of the cuDNN / cuBLAS ops: the SDK's shared OpCheck (kiln/sdk/op_check.hpp), so
// every backend refuses the same mistakes with the same words ("cuda backend, conv2d_forward: y is
// f32(2, 8, 5, 5) but must have shape (2, 8, 6, 6); fix the arguments the calling layer passes").
// Tensors must be in device memory; the per-op rules are the SDK's (kiln/sdk/op_args.hpp,
// op_descs.hpp).
#pragma once

#include <string>
#include <string_view>

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include <kiln/sdk/op_check.hpp>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// The SDK's shared argument checks for the "cuda" backend (device memory), plus the cuDNN and
/// cuBLAS status checks of the dnn ops.
class DnnCheck : public sdk::OpCheck {
 public:
  explicit DnnCheck(Op op) noexcept : sdk::OpCheck("cuda", sdk::OperandMemory::device, op) {}

  /// Throws BackendError "cuda backend, <op>: <what>" (a library failure, not the caller's fault).
  [[noreturn]] void fail_library(const std::string& what) const;

  /// Turns a cuDNN status into the BackendError of check_cudnn, the message naming this op and
  /// what `describe()` returns (built only on failure, so the hot path formats nothing).
  template <class Describe>
  void cudnn(cudnnStatus_t s, Describe&& describe) const {
    if (s != CUDNN_STATUS_SUCCESS) cudnn_failed(s, describe());
  }
  template <class Describe>
  void cublas(cublasStatus_t s, Describe&& describe) const {
    if (s != CUBLAS_STATUS_SUCCESS) cublas_failed(s, describe());
  }

 private:
  void cudnn_failed(cudnnStatus_t s, const std::string& what) const;
  void cublas_failed(cublasStatus_t s, const std::string& what) const;
};

/// "nchw" / "nhwc", for messages.
std::string_view layout_word(Layout layout) noexcept;

}  // namespace kiln::cuda
