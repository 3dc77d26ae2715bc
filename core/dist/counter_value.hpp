// How add() counters are stored by every store: the value as decimal ASCII text, so get() of a
// counter reads the same from a MemoryStore and a FileStore (and from other tools).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::dist::detail {

/// Parses a counter value; an empty value is 0. Throws CommError naming `key` and `where` if
/// the bytes are not a decimal integer (the key was set() by something else).
std::int64_t parse_counter(const std::vector<std::uint8_t>& bytes, const std::string& key,
                           const std::string& where);
std::vector<std::uint8_t> format_counter(std::int64_t value);

}  // namespace kiln::dist::detail
