// Overflow-checked size arithmetic: the one helper every element count, byte count and arena size
// in Kiln goes through. A product that wraps silently turns a huge request into a tiny allocation
// and the writes that follow into a heap overflow; these return "does not fit" instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln::sdk {

/// a * b for non-negative a and b, or nullopt when a or b is negative or the product exceeds
/// INT64_MAX.
std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) noexcept;
/// a + b for non-negative a and b, or nullopt when negative or above INT64_MAX.
std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept;
/// count elements of elem_bytes each as a size_t byte count, or nullopt when it does not fit.
std::optional<std::size_t> checked_bytes(std::int64_t count, std::size_t elem_bytes) noexcept;

/// The same, throwing ConfigError "<what> = a x b overflows a 64-bit size; <hint>" on overflow:
/// `what` names the quantity and where it came from (a config key, a file), `hint` what to do.
std::int64_t mul_or_throw(std::int64_t a, std::int64_t b, std::string_view what, std::string_view hint);
std::int64_t add_or_throw(std::int64_t a, std::int64_t b, std::string_view what, std::string_view hint);

}  // namespace kiln::sdk
