// Argument checks shared by every CPU op.
//
// Every op validates each tensor it touches before reading a byte, and a failure is a
// BackendError naming the backend, the op, the argument and Tensor::describe() of it (and of the
// tensor it had to match), so "cpu backend, matmul: c is f32(64, 10) but must have shape
// (64, 128)" points straight at the caller's mistake. The checks are inline and cheap (they run
// on every call); only the message building is out of line.
#pragma once

#include <string>
#include <string_view>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cpu {

class OpCheck {
 public:
  explicit OpCheck(Op op) noexcept : op_(op) {}

  /// Throws BackendError "cpu backend, <op>: <what>; <what to do>".
  [[noreturn]] void fail(const std::string& what) const;

  /// t is defined, in host memory and row-major (matrices, vectors, flat buffers).
  const OpCheck& usable(std::string_view name, const Tensor& t) const {
    if (!t.defined() || t.memory() == MemoryKind::device || t.layout() != Layout::row_major) {
      fail_unusable(name, t);
    }
    return *this;
  }
  /// Like usable(), but a 4-D image activation may also be channels-last (Layout::nhwc).
  const OpCheck& usable_image(std::string_view name, const Tensor& t) const {
    if (!t.defined() || t.memory() == MemoryKind::device || t.layout() == Layout::opaque ||
        (t.layout() == Layout::nhwc && t.rank() != 4)) {
      fail_unusable(name, t);
    }
    return *this;
  }
  /// Element-wise ops walk memory in order, so all their operands must share one layout.
  const OpCheck& same_layout(std::string_view name, const Tensor& t, std::string_view ref_name,
                             const Tensor& ref) const {
    if (t.layout() != ref.layout()) fail_same_layout(name, t, ref_name, ref);
    return *this;
  }
  const OpCheck& dtype(std::string_view name, const Tensor& t, DType want) const {
    if (t.dtype() != want) fail_dtype(name, t, want);
    return *this;
  }
  /// t is f32, bf16 or f16 (the dtypes of the element-wise loops).
  const OpCheck& float_dtype(std::string_view name, const Tensor& t) const {
    if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16) {
      fail_float_dtype(name, t);
    }
    return *this;
  }
  const OpCheck& shape(std::string_view name, const Tensor& t, const Shape& want) const {
    if (t.shape() != want) fail_shape(name, t, want);
    return *this;
  }
  const OpCheck& rank(std::string_view name, const Tensor& t, int want) const {
    if (t.rank() != want) fail_rank(name, t, want);
    return *this;
  }
  /// t has the same shape as `ref` (dtype is checked separately).
  const OpCheck& same_shape(std::string_view name, const Tensor& t, std::string_view ref_name,
                            const Tensor& ref) const {
    if (t.shape() != ref.shape()) fail_same_shape(name, t, ref_name, ref);
    return *this;
  }
  /// t has as many elements as `ref` (any shape).
  const OpCheck& same_numel(std::string_view name, const Tensor& t, std::string_view ref_name,
                            const Tensor& ref) const {
    if (t.numel() != ref.numel()) fail_same_numel(name, t, ref_name, ref);
    return *this;
  }

 private:
  [[noreturn]] void fail_unusable(std::string_view name, const Tensor& t) const;
  [[noreturn]] void fail_same_layout(std::string_view name, const Tensor& t,
                                     std::string_view ref_name, const Tensor& ref) const;
  [[noreturn]] void fail_dtype(std::string_view name, const Tensor& t, DType want) const;
  [[noreturn]] void fail_float_dtype(std::string_view name, const Tensor& t) const;
  [[noreturn]] void fail_shape(std::string_view name, const Tensor& t, const Shape& want) const;
  [[noreturn]] void fail_rank(std::string_view name, const Tensor& t, int want) const;
  [[noreturn]] void fail_same_shape(std::string_view name, const Tensor& t,
                                    std::string_view ref_name, const Tensor& ref) const;
  [[noreturn]] void fail_same_numel(std::string_view name, const Tensor& t,
                                    std::string_view ref_name, const Tensor& ref) const;

  Op op_;
};

}  // namespace kiln::cpu
