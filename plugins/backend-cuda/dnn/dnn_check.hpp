// Argument checks of the cuDNN / cuBLAS ops, mirroring the cpu backend's OpCheck so both
// backends refuse the same mistakes with the same words ("cuda backend, conv2d_forward: y is
// f32(2, 8, 5, 5) but must have shape (2, 8, 6, 6); fix the arguments the calling layer passes").
// Differences: tensors must be in device memory, and image tensors may be row_major (NCHW) or
// nhwc. The checks are inline; only message building is out of line (dnn_check.cpp).
#pragma once

#include <string>
#include <string_view>

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// Which layouts an argument may have.
enum class LayoutRule : std::uint8_t { row_major_only, image };

class DnnCheck {
 public:
  explicit DnnCheck(Op op) noexcept : op_(op) {}

  Op op() const noexcept { return op_; }

  /// Throws BackendError "cuda backend, <op>: <what>; fix the arguments the calling layer passes".
  [[noreturn]] void fail(const std::string& what) const;
  /// Throws BackendError "cuda backend, <op>: <what>" (a library failure, not the caller's fault).
  [[noreturn]] void fail_library(const std::string& what) const;

  /// t is defined, in device memory and row-major (or, for LayoutRule::image, nhwc too).
  const DnnCheck& usable(std::string_view name, const Tensor& t,
                         LayoutRule rule = LayoutRule::row_major_only) const {
    const bool layout_ok = t.layout() == Layout::row_major ||
                           (rule == LayoutRule::image && t.layout() == Layout::nhwc);
    if (!t.defined() || t.memory() != MemoryKind::device || !layout_ok) fail_unusable(name, t, rule);
    return *this;
  }
  const DnnCheck& dtype(std::string_view name, const Tensor& t, DType want) const {
    if (t.dtype() != want) fail_dtype(name, t, want);
    return *this;
  }
  /// t is f32, bf16 or f16.
  const DnnCheck& float_dtype(std::string_view name, const Tensor& t) const {
    if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16) {
      fail_float_dtype(name, t);
    }
    return *this;
  }
  const DnnCheck& shape(std::string_view name, const Tensor& t, const Shape& want) const {
    if (t.shape() != want) fail_shape(name, t, want);
    return *this;
  }
  const DnnCheck& rank(std::string_view name, const Tensor& t, int want) const {
    if (t.rank() != want) fail_rank(name, t, want);
    return *this;
  }

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
  [[noreturn]] void fail_unusable(std::string_view name, const Tensor& t, LayoutRule rule) const;
  [[noreturn]] void fail_dtype(std::string_view name, const Tensor& t, DType want) const;
  [[noreturn]] void fail_float_dtype(std::string_view name, const Tensor& t) const;
  [[noreturn]] void fail_shape(std::string_view name, const Tensor& t, const Shape& want) const;
  [[noreturn]] void fail_rank(std::string_view name, const Tensor& t, int want) const;
  void cudnn_failed(cudnnStatus_t s, const std::string& what) const;
  void cublas_failed(cublasStatus_t s, const std::string& what) const;

  Op op_;
};

/// "nchw" / "nhwc", for messages.
std::string_view layout_word(Layout layout) noexcept;

}  // namespace kiln::cuda
