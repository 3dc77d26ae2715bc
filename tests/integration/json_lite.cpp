// The integration tests' JSON tree, built on the core's strict parser (kiln/io/json.hpp) so the
// tests read metrics.jsonl with the same rules Kiln reads safetensors headers with.
#include "json_lite.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kiln/io/json.hpp"

namespace kiln::test::json {
namespace {

Value convert(const kiln::io::JsonValue& in) {
  using K = kiln::io::JsonValue::Kind;
  Value out;
  switch (in.kind) {
    case K::null: out.kind = Value::Kind::null; break;
    case K::boolean:
      out.kind = Value::Kind::boolean;
      out.boolean = in.boolean;
      break;
    case K::number:
      out.kind = Value::Kind::number;
      out.number = std::strtod(in.text.c_str(), nullptr);
      out.integer = in.text.find_first_of(".eE") == std::string::npos;
      break;
    case K::string:
      out.kind = Value::Kind::string;
      out.string = in.text;
      break;
    case K::array:
      out.kind = Value::Kind::array;
      for (const auto& item : in.array) out.items.push_back(convert(item));
      break;
    case K::object:
      out.kind = Value::Kind::object;
      for (const auto& [k, v] : in.object) out.members.push_back(Member{k, convert(v)});
      break;
  }
  return out;
}

}  // namespace

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  throw std::runtime_error("JSON object has no member '" + std::string(key) + "'");
}

Value parse(std::string_view text) { return convert(kiln::io::parse_json(text, "JSON document")); }

}  // namespace kiln::test::json
