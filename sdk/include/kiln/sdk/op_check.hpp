// Argument checks for backend ops, shared by every backend (cpu, cuda, and third-party ones), so
// each refuses the same mistakes with the same words: "cuda backend, conv2d_forward: y is
// f32(2, 8, 5, 5) but must have shape (2, 8, 6, 6); fix the arguments the calling layer passes".
//
// A backend makes one OpCheck per op call with its name and where its operands must live; every
// tensor an op touches is checked before a byte is read. The checks are inline and cheap (they
// run on every call); only message building is out of line (libkiln_sdk). Layout rules follow
// backend.hpp: usable() is for matrices, vectors and flat buffers (row-major only), usable_image()
// also accepts 4-D channels-last activations, and same_layout() is for ops that pair operands'
// elements by memory position.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::sdk {

/// Where a backend's op operands must be: host memory (any host kind) or device memory.
enum class OperandMemory : std::uint8_t { host, device };

class OpCheck {
 public:
  /// `backend` must outlive the check (a string literal: "cpu").
  OpCheck(std::string_view backend, OperandMemory memory, Op op) noexcept
      : backend_(backend), memory_(memory), op_(op) {}

  Op op() const noexcept { return op_; }

  /// Throws BackendError "<backend> backend, <op>: <what>; fix the arguments the calling layer passes".
  [[noreturn]] void fail(const std::string& what) const;

  /// t is defined, in the backend's memory and row-major.
  const OpCheck& usable(std::string_view name, const Tensor& t) const {
    if (!t.defined() || !in_our_memory(t) || t.layout() != Layout::row_major) fail_unusable(name, t);
    return *this;
  }
  /// Like usable(), but a 4-D image activation may also be channels-last (Layout::nhwc).
  const OpCheck& usable_image(std::string_view name, const Tensor& t) const {
    if (!t.defined() || !in_our_memory(t) || t.layout() == Layout::opaque ||
        (t.layout() == Layout::nhwc && t.rank() != 4)) {
      fail_unusable(name, t);
    }
    return *this;
  }
  const OpCheck& dtype(std::string_view name, const Tensor& t, DType want) const {
    if (t.dtype() != want) fail_dtype(name, t, want);
    return *this;
  }
  /// t is f32, bf16 or f16.
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
  /// t is laid out like `ref` (ops that pair elements by memory position).
  const OpCheck& same_layout(std::string_view name, const Tensor& t, std::string_view ref_name,
                             const Tensor& ref) const {
    if (t.layout() != ref.layout()) fail_same_layout(name, t, ref_name, ref);
    return *this;
  }
  /// t is row-major (an operand that is never an image activation: labels, pooled features).
  const OpCheck& row_major(std::string_view name, const Tensor& t) const {
    if (t.layout() != Layout::row_major) fail_row_major(name, t);
    return *this;
  }

 private:
  bool in_our_memory(const Tensor& t) const noexcept {
    return (t.memory() == MemoryKind::device) == (memory_ == OperandMemory::device);
  }
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

  std::string_view backend_;
  OperandMemory memory_;
  Op op_;
};

}  // namespace kiln::sdk
