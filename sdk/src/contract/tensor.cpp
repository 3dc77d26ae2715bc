// Tensor, Storage and the dtype helpers of interfaces/kiln/tensor.hpp.
#include "kiln/tensor.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>

#include "kiln/errors.hpp"
#include "kiln/sdk/checked_size.hpp"

namespace kiln {

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "unknown";
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw BackendError("tensor shape " + shape_string(shape) + " has a negative dimension");
    const auto next = sdk::checked_mul(n, d);
    if (!next) {
      throw BackendError("tensor shape " + shape_string(shape) +
                         " has more elements than fit in 64 bits; a size in the config or file that "
                         "made it is far too large");
    }
    n = *next;
  }
  return n;
}

std::size_t shape_bytes(const Shape& shape, DType dtype) {
  const auto bytes = sdk::checked_bytes(shape_numel(shape), dtype_size(dtype));
  if (!bytes) {
    throw BackendError(fmt::format("tensor {}{} needs more bytes than fit in 64 bits; a size in the config or "
                                   "file that made it is far too large",
                                   dtype_name(dtype), shape_string(shape)));
  }
  return *bytes;
}

std::string shape_string(const Shape& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

Storage::Storage(void* data, std::size_t bytes, MemoryKind kind, Release release)
    : data_(data), bytes_(bytes), kind_(kind), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_ && data_) release_(data_);
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, std::size_t offset_bytes,
               Layout layout)
    : storage_(std::move(storage)), shape_(std::move(shape)), dtype_(dtype), offset_(offset_bytes),
      layout_(layout) {
  // Checked here once, so numel() and bytes() (noexcept) cannot overflow afterwards.
  const std::size_t view_bytes = shape_bytes(shape_, dtype_);
  if (storage_ && (offset_ > storage_->bytes() || view_bytes > storage_->bytes() - offset_)) {
    throw BackendError(fmt::format("tensor view {} at byte offset {} does not fit in a storage of {} bytes",
                                   describe(), offset_, storage_->bytes()));
  }
}

std::int64_t Tensor::dim(int i) const {
  const int r = rank();
  const int k = i < 0 ? i + r : i;
  if (k < 0 || k >= r) {
    throw BackendError(fmt::format("dimension {} out of range for tensor {}", i, describe()));
  }
  return shape_[static_cast<std::size_t>(k)];
}

MemoryKind Tensor::memory() const noexcept {
  return storage_ ? storage_->kind() : MemoryKind::host;
}

void* Tensor::data() const noexcept {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_;
}

void Tensor::check_element_size(std::size_t size) const {
  if (size != dtype_size(dtype_)) {
    throw BackendError(fmt::format("tensor {} read with an element type of {} bytes", describe(), size));
  }
}

Tensor Tensor::rows(std::int64_t begin, std::int64_t count) const {
  if (rank() < 1 || begin < 0 || count < 0 || count > shape_[0] - begin) {
    throw BackendError(fmt::format("rows [{}, {}) out of range for tensor {}", begin, begin + count, describe()));
  }
  if (layout_ == Layout::opaque) throw BackendError("rows() of an opaque-layout tensor " + describe());
  Shape s = shape_;
  s[0] = count;
  const std::int64_t row_elems = shape_[0] == 0 ? 0 : numel() / shape_[0];
  return Tensor(storage_, std::move(s), dtype_,
                offset_ + static_cast<std::size_t>(begin * row_elems) * dtype_size(dtype_), layout_);
}

Tensor Tensor::view(std::int64_t offset, Shape shape) const {
  if (layout_ == Layout::opaque) throw BackendError("view() of an opaque-layout tensor " + describe());
  if (offset < 0 || shape_numel(shape) > numel() - offset) {
    throw BackendError(fmt::format("view of {} elements at offset {} out of range for tensor {}",
                                   shape_numel(shape), offset, describe()));
  }
  return Tensor(storage_, std::move(shape), dtype_, offset_ + static_cast<std::size_t>(offset) * dtype_size(dtype_),
                Layout::row_major);
}

Tensor Tensor::reshape(Shape shape) const {
  if (layout_ != Layout::row_major && shape != shape_) {
    throw BackendError(fmt::format("cannot reshape tensor {} to {}: only row-major tensors can be reshaped",
                                   describe(), shape_string(shape)));
  }
  if (shape_numel(shape) != numel()) {
    throw BackendError(fmt::format("cannot reshape tensor {} to {}", describe(), shape_string(shape)));
  }
  return Tensor(storage_, std::move(shape), dtype_, offset_, layout_);
}

Tensor Tensor::with_layout(Layout layout) const {
  if (layout == Layout::opaque || layout_ == Layout::opaque) {
    throw BackendError("with_layout() cannot tag or untag an opaque-layout tensor " + describe());
  }
  return Tensor(storage_, shape_, dtype_, offset_, layout);
}

std::string Tensor::describe() const {
  return fmt::format("{}{}{}", dtype_name(dtype_), shape_string(shape_), layout_ == Layout::nhwc ? " nhwc" : "");
}

Tensor host_tensor(Shape shape, DType dtype) {
  const std::size_t bytes = shape_bytes(shape, dtype);
  if (bytes > SIZE_MAX - 64) throw BackendError(fmt::format("cannot allocate {} bytes of host memory", bytes));
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) throw BackendError(fmt::format("out of host memory allocating {} bytes", bytes));
  auto storage = std::make_shared<Storage>(p, bytes, MemoryKind::host, [](void* q) { std::free(q); });
  return Tensor(std::move(storage), std::move(shape), dtype);
}

}  // namespace kiln
