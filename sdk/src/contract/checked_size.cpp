// Bodies of kiln/sdk/checked_size.hpp; the builtins compile to one multiply and a flag test.
#include "kiln/sdk/checked_size.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::sdk {

std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<std::size_t> checked_bytes(std::int64_t count, std::size_t elem_bytes) noexcept {
  std::size_t r = 0;
  if (count < 0 || __builtin_mul_overflow(static_cast<std::uint64_t>(count), elem_bytes, &r)) return std::nullopt;
  return r;
}

std::int64_t mul_or_throw(std::int64_t a, std::int64_t b, std::string_view what, std::string_view hint) {
  if (auto r = checked_mul(a, b)) return *r;
  throw ConfigError(fmt::format("{} = {} x {} overflows a 64-bit size; {}", what, a, b, hint));
}

std::int64_t add_or_throw(std::int64_t a, std::int64_t b, std::string_view what, std::string_view hint) {
  if (auto r = checked_add(a, b)) return *r;
  throw ConfigError(fmt::format("{} = {} + {} overflows a 64-bit size; {}", what, a, b, hint));
}

}  // namespace kiln::sdk
