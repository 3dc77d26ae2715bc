// AllocationLabel: what an allocation request is, for the out-of-memory message only.
//
// Why: the allocator is on the hot path (every activation, every gradient, every workspace, tens
// of thousands of calls per ResNet-50 step), and its message ("backend 'cuda', allocate
// f16(256, 64, 56, 56)") used to be formatted on every call to be thrown away on success. A label
// only keeps views and numbers (no heap memory, no formatting) and is turned into text by str()
// when the request fails. It is non-owning: it views the caller's prefix and shape, so it lives
// only for the allocate call it is passed to. Plain C++ (tested in CI).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kiln/tensor.hpp"

namespace kiln::cuda {

class AllocationLabel {
 public:
  /// A fixed text: "backend 'cuda', barrier buffer". Implicit from a string literal, so a
  /// fixed label reads as one (`pool.allocate(n, stream, "staging")`).
  AllocationLabel(const char* text) noexcept : kind_(Kind::text), prefix_(text) {}  // NOLINT(google-explicit-constructor)
  static AllocationLabel text(std::string_view text) noexcept;
  /// A tensor: "<prefix> f16(256, 64, 56, 56)". `shape` is viewed, not copied.
  static AllocationLabel tensor(std::string_view prefix, DType dtype, const Shape& shape) noexcept;
  /// A byte buffer: "<prefix> of 4096 bytes".
  static AllocationLabel bytes(std::string_view prefix, std::size_t bytes) noexcept;

  /// The text for the error message (formats; call on the failure path only).
  std::string str() const;

 private:
  enum class Kind { text, tensor, bytes };
  AllocationLabel(Kind kind, std::string_view prefix) noexcept : kind_(kind), prefix_(prefix) {}

  Kind kind_;
  std::string_view prefix_;
  DType dtype_ = DType::u8;
  const Shape* shape_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace kiln::cuda
