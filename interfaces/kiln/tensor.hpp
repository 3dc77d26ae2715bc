// Tensor: a typed, shaped view of memory owned by a Backend.
//
// A Tensor is a plain value: copying it copies the view, not the bytes, and the shared Storage
// keeps the memory alive. The logical shape is always in PyTorch order ((N, C, H, W) for images,
// (B, F) for features, (out, in) for Linear weights); `layout` says how it sits in memory, and a
// backend may use a private blocked layout (Layout::opaque) that only it reads. Views into a flat
// arena (parameters, gradients) share one Storage with different byte offsets.
//
// Thread-safety: a Tensor is as thread-safe as a std::shared_ptr: concurrent reads are fine,
// concurrent writes to the same elements are the caller's problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// Element types. Values are part of the ABI.
enum class DType : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2, f64 = 3, i32 = 4, i64 = 5, u8 = 6 };

/// Bytes per element.
std::size_t dtype_size(DType dtype) noexcept;
/// "f32", "bf16", ...
std::string_view dtype_name(DType dtype) noexcept;

/// Where bytes live. host_pinned is host memory the device can DMA from (cudaHostAlloc).
enum class MemoryKind : std::uint8_t { host = 0, host_pinned = 1, device = 2 };

/// Physical arrangement of the elements.
enum class Layout : std::uint8_t {
  row_major = 0,  ///< contiguous in logical order (C order); the default
  nhwc = 1,       ///< a logical (N, C, H, W) tensor stored channels-last
  opaque = 2      ///< backend-private (oneDNN blocked); only the owning backend may read it
};

/// Logical shape, outermost dimension first.
using Shape = std::vector<std::int64_t>;
/// Product of the dimensions (1 for a scalar shape {}). Throws BackendError when a dimension is
/// negative or the product does not fit in int64 (a hostile config or file could otherwise make it
/// wrap to a small number and the allocation too small for the writes that follow).
std::int64_t shape_numel(const Shape& shape);
/// shape_numel(shape) * dtype_size(dtype), checked the same way against size_t.
std::size_t shape_bytes(const Shape& shape, DType dtype);
/// "(64, 784)".
std::string shape_string(const Shape& shape);

/// A block of memory and the function that gives it back to its allocator.
/// Not copyable; shared between tensors through std::shared_ptr.
class Storage {
 public:
  using Release = std::function<void(void*)>;
  /// Takes ownership of `data` (of `bytes` bytes); `release` is called once from the destructor.
  Storage(void* data, std::size_t bytes, MemoryKind kind, Release release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }
  MemoryKind kind() const noexcept { return kind_; }

 private:
  void* data_;
  std::size_t bytes_;
  MemoryKind kind_;
  Release release_;
};

/// A typed view of (part of) a Storage.
class Tensor {
 public:
  /// An undefined tensor (defined() == false).
  Tensor() = default;
  /// View `shape` elements of `dtype` starting `offset_bytes` into `storage`.
  /// Throws BackendError if the view does not fit in the storage.
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, std::size_t offset_bytes = 0,
         Layout layout = Layout::row_major);

  bool defined() const noexcept { return storage_ != nullptr; }
  const Shape& shape() const noexcept { return shape_; }
  /// Size of dimension `i`; negative `i` counts from the end. Throws BackendError out of range.
  std::int64_t dim(int i) const;
  int rank() const noexcept { return static_cast<int>(shape_.size()); }
  // The constructor checked that numel and bytes fit, so these never throw once it returned.
  std::int64_t numel() const noexcept { return shape_numel(shape_); }
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const noexcept { return dtype_; }
  Layout layout() const noexcept { return layout_; }
  MemoryKind memory() const noexcept;
  std::size_t offset_bytes() const noexcept { return offset_; }
  const std::shared_ptr<Storage>& storage() const noexcept { return storage_; }

  /// Raw pointer to the first element (device pointer for device memory).
  void* data() const noexcept;
  /// Typed pointer; throws BackendError if T does not match dtype() in size.
  template <class T>
  T* data_as() const {
    check_element_size(sizeof(T));
    return static_cast<T*>(data());
  }

  /// `count` rows starting at `begin` along dimension 0 (same storage, same layout). Row-major
  /// or nhwc (the batch dimension is outermost in both).
  Tensor rows(std::int64_t begin, std::int64_t count) const;
  /// `numel(shape)` elements starting at element `offset` of this tensor, reinterpreted with
  /// `shape` (same storage). Row-major only.
  Tensor view(std::int64_t offset, Shape shape) const;
  /// Same elements, new shape with equal numel. Row-major only.
  Tensor reshape(Shape shape) const;
  /// The same bytes tagged with another layout (no data moves): how a layer turns a buffer from
  /// Backend::allocate() into a channels-last activation. Throws BackendError for opaque.
  Tensor with_layout(Layout layout) const;

  /// "f32(64, 784)".
  std::string describe() const;

 private:
  void check_element_size(std::size_t size) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::f32;
  std::size_t offset_ = 0;
  Layout layout_ = Layout::row_major;
};

/// Allocates plain (unpinned) host memory, 64-byte aligned, for tests and host-side staging.
/// Throws BackendError on allocation failure.
Tensor host_tensor(Shape shape, DType dtype);

}  // namespace kiln
