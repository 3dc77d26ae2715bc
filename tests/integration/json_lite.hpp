// The integration tests' JSON tree: parses one document (a metrics.jsonl
// line, `kiln plugins list --json`) into a tree, and throws std::runtime_error with the byte
// offset on anything that is not JSON. Numbers remember whether they were written as integers.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::test::json {

struct Member;

struct Value {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool boolean = false;
  double number = 0;
  bool integer = false;  ///< a number written without fraction or exponent
  std::string string;
  std::vector<Value> items;                            ///< array
  std::vector<Member> members;                         ///< object, in document order

  /// The member named `key`, or nullptr (objects only).
  const Value* find(std::string_view key) const;
  /// The member named `key`; throws std::runtime_error naming it if absent.
  const Value& at(std::string_view key) const;
};

/// One member of an object, named like std::pair's fields. Not a std::pair<std::string, Value>:
/// inside Value that pair is instantiated while Value is still incomplete, which clang refuses.
struct Member {
  std::string first;
  Value second;
};

/// Parses exactly one JSON document (surrounding whitespace allowed).
Value parse(std::string_view text);

}  // namespace kiln::test::json
