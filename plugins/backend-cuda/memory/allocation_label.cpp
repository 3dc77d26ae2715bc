// AllocationLabel (allocation_label.hpp): the formatting, reached only when a request fails.
#include "memory/allocation_label.hpp"

#include <fmt/format.h>

namespace kiln::cuda {

AllocationLabel AllocationLabel::text(std::string_view text) noexcept { return {Kind::text, text}; }

AllocationLabel AllocationLabel::tensor(std::string_view prefix, DType dtype, const Shape& shape) noexcept {
  AllocationLabel label(Kind::tensor, prefix);
  label.dtype_ = dtype;
  label.shape_ = &shape;
  return label;
}

AllocationLabel AllocationLabel::bytes(std::string_view prefix, std::size_t bytes) noexcept {
  AllocationLabel label(Kind::bytes, prefix);
  label.bytes_ = bytes;
  return label;
}

std::string AllocationLabel::str() const {
  switch (kind_) {
    case Kind::text: return std::string(prefix_);
    case Kind::tensor: return fmt::format("{} {}{}", prefix_, dtype_name(dtype_), shape_string(*shape_));
    case Kind::bytes: return fmt::format("{} of {} bytes", prefix_, bytes_);
  }
  return std::string(prefix_);
}

}  // namespace kiln::cuda
