// Decimal-text counters shared by the stores (see counter_value.hpp).
#include "counter_value.hpp"

#include <fmt/format.h>

#include <charconv>

#include "kiln/errors.hpp"

namespace kiln::dist::detail {

std::int64_t parse_counter(const std::vector<std::uint8_t>& bytes, const std::string& key,
                           const std::string& where) {
  if (bytes.empty()) return 0;
  const std::string text(bytes.begin(), bytes.end());
  std::int64_t value = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    throw CommError(fmt::format(
        "store key '{}' in {} holds {} bytes that are not a decimal integer, so add() cannot "
        "count on it; use a key that only add() touches",
        key, where, bytes.size()));
  }
  return value;
}

std::vector<std::uint8_t> format_counter(std::int64_t value) {
  const std::string text = std::to_string(value);
  return {text.begin(), text.end()};
}

}  // namespace kiln::dist::detail
