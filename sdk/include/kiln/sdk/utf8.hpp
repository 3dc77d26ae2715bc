// Well-formed UTF-8 (RFC 3629), for text that ends up in JSON, CSV and logs: JSON requires UTF-8,
// and a byte that is not (a Latin-1 file name) can only be escaped as another character.
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln::sdk {

/// Length of the well-formed UTF-8 sequence at text[i] (1 to 4 bytes), or 0 where it is not one:
/// a stray continuation byte, an overlong form, a surrogate, a code point past U+10FFFF or a
/// sequence cut short. `i` must be below text.size().
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept;

/// Whether all of `text` is well-formed UTF-8.
bool is_utf8(std::string_view text) noexcept;

}  // namespace kiln::sdk
