// Size classes of the caching allocator (see bin_policy.hpp for the rules and why).
#include "memory/bin_policy.hpp"

namespace kiln::cuda {

std::size_t round_request(std::size_t bytes) noexcept {
  if (bytes <= kSmallLimit) return bytes == 0 ? kSmallUnit : round_up(bytes, kSmallUnit);
  return round_up(bytes, kLargeUnit);
}

SizeClass size_class(std::size_t rounded) noexcept {
  return rounded <= kSmallLimit ? SizeClass::small : SizeClass::large;
}

std::size_t segment_bytes(std::size_t rounded) noexcept {
  return size_class(rounded) == SizeClass::small ? kSmallSegment : rounded;
}

bool should_split(std::size_t block, std::size_t wanted) noexcept {
  const std::size_t unit = size_class(wanted) == SizeClass::small ? kSmallUnit : kLargeUnit;
  return block >= wanted + unit;
}

}  // namespace kiln::cuda
