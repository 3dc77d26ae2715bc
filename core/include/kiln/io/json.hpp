// A small, strict JSON reader for the few JSON documents Kiln reads (safetensors headers).
// Numbers keep their text so integers up to 2^64 stay exact; depth and size are bounded by the
// caller's input. Errors are DataErrors with the byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/io/text_out.hpp"

namespace kiln::io {

struct JsonMember;

struct JsonValue {
  enum class Kind : std::uint8_t { null, boolean, number, string, array, object } kind = Kind::null;
  bool boolean = false;
  std::string text;  ///< string contents, or the number's literal text
  std::vector<JsonValue> array;
  std::vector<JsonMember> object;  ///< in document order (duplicates kept)

  /// The number as a non-negative integer; throws DataError (naming `what`) otherwise.
  std::uint64_t as_uint(const std::string& what) const;
};

/// One member of an object. A struct rather than std::pair<std::string, JsonValue>: clang with
/// libstdc++ rejects that pair as a member of JsonValue while JsonValue is still incomplete.
struct JsonMember {
  std::string key;
  JsonValue value;
};

/// `text` as a JSON string literal, quotes included: `"` and `\` escaped, \b \f \n \r \t in their
/// short forms, other control characters as \u00XX; well-formed UTF-8 as it is, and any other byte
/// of 0x80 or more as the code point of that value (\u00XX), so the result is always UTF-8. The
/// one writer-side escape of the JSON Kiln writes by hand (safetensors headers, profiles,
/// metrics.jsonl, `kiln plugins --json`, `kiln bench-comm` JSON).
std::string json_quoted(std::string_view text);
/// json_quoted()'s text, written into `out` without allocating (async-signal-safe with a BufferOut).
void put_json_quoted(TextOut& out, std::string_view text);

/// Parses one JSON document (surrounding whitespace allowed). Strings must be well-formed UTF-8
/// (\u escapes included: a surrogate only as half of a pair). `what` names the source in errors.
JsonValue parse_json(std::string_view text, const std::string& what);

}  // namespace kiln::io
