// Conversion of TOML nodes into typed ParamValues, shared by validation and schema defaults.
//
// One function decides what is acceptable for each kiln_param_type (ints widen to floats, never
// the reverse; lists must be homogeneous), so a default in a schema and a value in run.toml obey
// the same rules. A mismatch reports the offending node and list index instead of throwing, so
// each caller words its own message (user error vs schema error).
#pragma once

#include <toml++/toml.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/params.hpp"

namespace kiln::config {

struct Conversion {
  std::optional<ParamValue> value;        // set on success
  const toml::node* bad = nullptr;        // the node of the wrong type
  std::optional<std::size_t> index;       // its index when it is a list element
};

/// Converts `node` to `type` (a kiln_param_type); `type` must be valid.
Conversion to_param(const toml::node& node, std::uint32_t type);
/// Whether `type` is a known kiln_param_type.
bool is_param_type(std::uint32_t type) noexcept;
/// Whether `type` is a list type; its element type is then element_type(type).
bool is_list_type(std::uint32_t type) noexcept;
std::uint32_t element_type(std::uint32_t type) noexcept;
/// "a string", "an integer", "a table", ... for what a TOML node holds.
std::string found_name(const toml::node& node);
/// "an integer", "a float list", ... for a kiln_param_type.
std::string expected_name(std::uint32_t type);
/// The TOML spelling of a node, for messages ("128", "'relu'").
std::string node_text(const toml::node& node);

}  // namespace kiln::config
