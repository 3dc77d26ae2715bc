// Argument checks of the cuda backend's kernel-group ops (the cpu backend's OpCheck rules, with
// the cuda backend's memory and layout rules): a failure is a BackendError
// "cuda backend, <op>: <what>; fix the arguments the calling layer passes" naming the argument
// and Tensor::describe() of it and of the tensor it had to match. Tensors must be in device
// memory; image tensors may be row-major (NCHW) or nhwc, and element-wise ops pair elements by
// memory position, so all operands of one call must share a layout. Plain C++: tested in CI.
#pragma once

#include <string>
#include <string_view>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {

class KernelCheck {
 public:
  explicit KernelCheck(Op op) noexcept : op_(op) {}

  /// Throws BackendError "cuda backend, <op>: <what>; fix the arguments the calling layer passes".
  [[noreturn]] void fail(const std::string& what) const;

  /// t is defined, in device memory and not in a backend-private (opaque) layout.
  const KernelCheck& usable(std::string_view name, const Tensor& t) const {
    if (!t.defined() || t.memory() != MemoryKind::device || t.layout() == Layout::opaque) {
      fail_unusable(name, t);
    }
    return *this;
  }
  const KernelCheck& dtype(std::string_view name, const Tensor& t, DType want) const {
    if (t.dtype() != want) fail_dtype(name, t, want);
    return *this;
  }
  /// t is f32, bf16 or f16.
  const KernelCheck& float_dtype(std::string_view name, const Tensor& t) const {
    if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16) {
      fail_float_dtype(name, t);
    }
    return *this;
  }
  const KernelCheck& shape(std::string_view name, const Tensor& t, const Shape& want) const {
    if (t.shape() != want) fail_shape(name, t, want);
    return *this;
  }
  const KernelCheck& rank(std::string_view name, const Tensor& t, int want) const {
    if (t.rank() != want) fail_rank(name, t, want);
    return *this;
  }
  const KernelCheck& same_shape(std::string_view name, const Tensor& t, std::string_view ref_name,
                                const Tensor& ref) const {
    if (t.shape() != ref.shape()) fail_same_shape(name, t, ref_name, ref);
    return *this;
  }
  const KernelCheck& same_numel(std::string_view name, const Tensor& t, std::string_view ref_name,
                                const Tensor& ref) const {
    if (t.numel() != ref.numel()) fail_same_numel(name, t, ref_name, ref);
    return *this;
  }
  /// t is laid out like `ref` (element-wise ops pair elements by memory position).
  const KernelCheck& same_layout(std::string_view name, const Tensor& t, std::string_view ref_name,
                                 const Tensor& ref) const {
    if (t.layout() != ref.layout()) fail_same_layout(name, t, ref_name, ref);
    return *this;
  }
  /// t is row-major (non-image operands: labels, probabilities, pooled features, raw images).
  const KernelCheck& row_major(std::string_view name, const Tensor& t) const {
    if (t.layout() != Layout::row_major) fail_row_major(name, t);
    return *this;
  }

 private:
  [[noreturn]] void fail_unusable(std::string_view name, const Tensor& t) const;
  [[noreturn]] void fail_dtype(std::string_view name, const Tensor& t, DType want) const;
  [[noreturn]] void fail_float_dtype(std::string_view name, const Tensor& t) const;
  [[noreturn]] void fail_shape(std::string_view name, const Tensor& t, const Shape& want) const;
  [[noreturn]] void fail_rank(std::string_view name, const Tensor& t, int want) const;
  [[noreturn]] void fail_same_shape(std::string_view name, const Tensor& t,
                                    std::string_view ref_name, const Tensor& ref) const;
  [[noreturn]] void fail_same_numel(std::string_view name, const Tensor& t,
                                    std::string_view ref_name, const Tensor& ref) const;
  [[noreturn]] void fail_same_layout(std::string_view name, const Tensor& t,
                                     std::string_view ref_name, const Tensor& ref) const;
  [[noreturn]] void fail_row_major(std::string_view name, const Tensor& t) const;

  Op op_;
};

}  // namespace kiln::cuda
