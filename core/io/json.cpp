// Recursive-descent JSON parser (RFC 8259), nesting limited to 64 levels.
#include "kiln/io/json.hpp"

#include <fmt/format.h>

#include <charconv>

#include "kiln/errors.hpp"
#include "kiln/sdk/utf8.hpp"

namespace kiln::io {
namespace {

/// Appends code point `code` (at most U+10FFFF, not a surrogate) as UTF-8.
void append_utf8(std::string& out, unsigned code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  JsonValue document() {
    JsonValue v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw DataError(fmt::format("{}: invalid JSON at byte {}: {}", what_, pos_, why));
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  JsonValue value(int depth) {
    if (depth > 64) fail("nested too deeply");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end");
    JsonValue v;
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = JsonValue::Kind::object;
      if (eat('}')) return v;
      do {
        skip_ws();
        std::string key = string();
        expect(':');
        v.object.push_back({std::move(key), value(depth + 1)});
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.kind = JsonValue::Kind::array;
      if (eat(']')) return v;
      do v.array.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.text = string();
    } else if (literal("true")) {
      v.kind = JsonValue::Kind::boolean;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = JsonValue::Kind::boolean;
    } else if (literal("null")) {
      v.kind = JsonValue::Kind::null;
    } else {
      v.kind = JsonValue::Kind::number;
      v.text = number();
    }
    return v;
  }

  std::string number() {
    const std::size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const std::size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > d;
    };
    if (!digits()) fail("expected a value");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) fail("expected digits after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) fail("expected exponent digits");
    }
    return std::string(s_.substr(start, pos_ - start));
  }

  std::string string() {
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        // Checked here, so that no name read from a file reaches an error message or a log as
        // bytes a terminal or a UTF-8 reader cannot show.
        const std::size_t length = sdk::utf8_sequence_length(s_, pos_);
        if (length == 0) fail("invalid UTF-8 in string");
        out.append(s_.substr(pos_, length));
        pos_ += length;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = hex4();
          if (code >= 0xDC00 && code <= 0xDFFF) fail("unpaired surrogate in \\u escape");
          if (code >= 0xD800 && code <= 0xDBFF) {  // a pair: \uD8xx\uDCxx is one code point
            if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') fail("unpaired surrogate in \\u escape");
            pos_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("unpaired surrogate in \\u escape");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default: fail(fmt::format("bad escape '\\{}'", e));
      }
    }
  }

  /// The four hex digits of a \\u escape, consumed.
  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    unsigned code = 0;
    const auto r = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, code, 16);
    if (r.ec != std::errc() || r.ptr != s_.data() + pos_ + 4) fail("bad \\u escape");
    pos_ += 4;
    return code;
  }

  std::string_view s_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

}  // namespace

std::uint64_t JsonValue::as_uint(const std::string& what) const {
  std::uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (kind != Kind::number || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    throw DataError(fmt::format("{}: expected a non-negative integer, found '{}'", what, text));
  }
  return v;
}

JsonValue parse_json(std::string_view text, const std::string& what) { return Parser(text, what).document(); }

void put_json_quoted(TextOut& out, std::string_view text) {
  // Written without allocating: the fatal-signal handler quotes the collective record's strings.
  constexpr std::string_view kHex = "0123456789abcdef";
  const auto escaped_byte = [&](unsigned char b) {
    const char digits[] = {kHex[b >> 4], kHex[b & 15]};
    out << "\\u00" << std::string_view(digits, 2);
  };
  out << "\"";
  std::size_t plain = 0;  // the start of the run of bytes written as they are
  const auto flush_plain = [&](std::size_t end) {
    if (end > plain) out << text.substr(plain, end - plain);
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      // Well-formed UTF-8 as it is; any other byte (a Latin-1 file name, say) as the code point
      // of the same value, so that every document written is UTF-8 a strict reader accepts.
      const std::size_t length = sdk::utf8_sequence_length(text, i);
      if (length == 0) {
        flush_plain(i);
        escaped_byte(c);
        plain = i + 1;
      } else {
        i += length - 1;
      }
      continue;
    }
    const char* shortcut = nullptr;
    switch (c) {
      case '"': shortcut = "\\\""; break;
      case '\\': shortcut = "\\\\"; break;
      case '\b': shortcut = "\\b"; break;
      case '\f': shortcut = "\\f"; break;
      case '\n': shortcut = "\\n"; break;
      case '\r': shortcut = "\\r"; break;
      case '\t': shortcut = "\\t"; break;
      default:
        if (c >= 0x20) continue;
    }
    flush_plain(i);
    if (shortcut) out << shortcut;
    else escaped_byte(c);
    plain = i + 1;
  }
  flush_plain(text.size());
  out << "\"";
}

std::string json_quoted(std::string_view text) {
  std::string quoted;
  quoted.reserve(text.size() + 2);
  StringOut out(quoted);
  put_json_quoted(out, text);
  return quoted;
}

}  // namespace kiln::io
