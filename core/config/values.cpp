// TOML node -> ParamValue conversion, type names for messages, and parse_literal for schema
// defaults. Only int64 integers exist in TOML, so KILN_PARAM_INT needs no range check here.
#include "values.hpp"

#include <fmt/format.h>

#include <sstream>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"

namespace kiln::config {
namespace {

/// Converts a scalar node; nullopt if it does not hold `type` (never a list type).
std::optional<ParamValue> to_scalar(const toml::node& node, std::uint32_t type) {
  switch (type) {
    case KILN_PARAM_BOOL:
      if (auto v = node.value_exact<bool>()) return ParamValue{*v};
      break;
    case KILN_PARAM_INT:
      if (auto v = node.value_exact<std::int64_t>()) return ParamValue{*v};
      break;
    case KILN_PARAM_FLOAT:
      if (auto v = node.value_exact<double>()) return ParamValue{*v};
      // An integer literal (lr = 1) is accepted where a float is expected and widened.
      if (auto v = node.value_exact<std::int64_t>()) return ParamValue{static_cast<double>(*v)};
      break;
    case KILN_PARAM_STRING:
    case KILN_PARAM_PATH:  // made absolute by validate(), which knows where the value came from
      if (auto v = node.value_exact<std::string>()) return ParamValue{std::move(*v)};
      break;
    default:
      break;
  }
  return std::nullopt;
}

template <class T>
Conversion to_list(const toml::node& node, std::uint32_t elem_type) {
  Conversion out;
  const toml::array* arr = node.as_array();
  if (arr == nullptr) {
    out.bad = &node;
    return out;
  }
  std::vector<T> values;
  values.reserve(arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    std::optional<ParamValue> v = to_scalar(*arr->get(i), elem_type);
    if (!v) {
      out.bad = arr->get(i);
      out.index = i;
      return out;
    }
    values.push_back(std::get<T>(std::move(*v)));
  }
  out.value = ParamValue{std::move(values)};
  return out;
}

std::string with_article(std::string_view noun) {
  const bool vowel = !noun.empty() && std::string_view("aeiou").find(noun.front()) != std::string_view::npos;
  return fmt::format("{} {}", vowel ? "an" : "a", noun);
}

}  // namespace

bool is_param_type(std::uint32_t type) noexcept {
  return type >= KILN_PARAM_BOOL && type <= KILN_PARAM_PATH;
}

bool is_list_type(std::uint32_t type) noexcept {
  return type == KILN_PARAM_INT_LIST || type == KILN_PARAM_FLOAT_LIST ||
         type == KILN_PARAM_STRING_LIST;
}

std::uint32_t element_type(std::uint32_t type) noexcept {
  switch (type) {
    case KILN_PARAM_INT_LIST: return KILN_PARAM_INT;
    case KILN_PARAM_FLOAT_LIST: return KILN_PARAM_FLOAT;
    case KILN_PARAM_STRING_LIST: return KILN_PARAM_STRING;
    default: return type;
  }
}

Conversion to_param(const toml::node& node, std::uint32_t type) {
  switch (type) {
    case KILN_PARAM_INT_LIST: return to_list<std::int64_t>(node, KILN_PARAM_INT);
    case KILN_PARAM_FLOAT_LIST: return to_list<double>(node, KILN_PARAM_FLOAT);
    case KILN_PARAM_STRING_LIST: return to_list<std::string>(node, KILN_PARAM_STRING);
    default: {
      Conversion out;
      out.value = to_scalar(node, type);
      if (!out.value) out.bad = &node;
      return out;
    }
  }
}

std::string found_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "a list";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a bool";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string expected_name(std::uint32_t type) { return with_article(param_type_name(type)); }

std::string node_text(const toml::node& node) {
  std::ostringstream os;
  node.visit([&](const auto& n) { os << n; });
  return os.str();
}

std::string_view param_type_name(std::uint32_t type) noexcept {
  switch (type) {
    case KILN_PARAM_BOOL: return "bool";
    case KILN_PARAM_INT: return "integer";
    case KILN_PARAM_FLOAT: return "float";
    case KILN_PARAM_STRING: return "string";
    case KILN_PARAM_INT_LIST: return "integer list";
    case KILN_PARAM_FLOAT_LIST: return "float list";
    case KILN_PARAM_STRING_LIST: return "string list";
    case KILN_PARAM_PATH: return "path";
    default: return "unknown type";
  }
}

ParamValue parse_literal(std::string_view literal, std::uint32_t type, std::string_view what) {
  if (!is_param_type(type)) {
    throw ConfigError(fmt::format("{}: parameter type {} is not a kiln_param_type", what, type));
  }
  toml::table doc;
  try {
    doc = toml::parse(fmt::format("v = {}", literal), std::string_view("literal"));
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}: '{}' is not a TOML value ({})", what, literal,
                                  e.description()));
  }
  const toml::node* node = doc.get("v");
  if (node == nullptr || doc.size() != 1) {
    throw ConfigError(fmt::format("{}: '{}' is not a single TOML value", what, literal));
  }
  Conversion c = to_param(*node, type);
  if (!c.value) {
    if (c.index) {
      throw ConfigError(fmt::format("{}: element {} of '{}' is {}, expected {}", what, *c.index,
                                    literal, found_name(*c.bad),
                                    expected_name(element_type(type))));
    }
    throw ConfigError(fmt::format("{}: '{}' is {}, expected {}", what, literal,
                                  found_name(*c.bad), expected_name(type)));
  }
  return std::move(*c.value);
}

}  // namespace kiln::config
