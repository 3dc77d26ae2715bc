// Validated parameter values handed to plugins.
//
// The core parses the TOML config, checks each plugin table against the plugin's schema
// (kiln_param_spec_v1), fills in defaults and hands the plugin a ParamMap: a plugin never sees
// TOML and never needs to validate types. Values keep where they came from, so a plugin that
// rejects a value (out of range, inconsistent) can say "model.dropout = 1.5 at run.toml:12".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace kiln {

using ParamValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                                std::vector<double>, std::vector<std::string>>;

/// One validated value and its origin ("run.toml:12", "--set model.dropout", "default").
struct Param {
  ParamValue value;
  std::string origin;
};

/// The validated table of one plugin (or of a core section such as [loader]).
/// Immutable after validation; safe to read from several threads.
class ParamMap {
 public:
  ParamMap() = default;
  /// `table` is the config table these values belong to, e.g. "data.train".
  explicit ParamMap(std::string table) : table_(std::move(table)) {}

  const std::string& table() const noexcept { return table_; }
  void set(std::string key, ParamValue value, std::string origin);
  bool contains(std::string_view key) const;

  /// The value of `key` as T (bool, std::int64_t, double, std::string or a vector of those).
  /// Throws ConfigError naming the table and key if it is missing or has another type (a
  /// schema/code mismatch in the plugin, not a user error; schema validation prevents the latter).
  template <class T>
  const T& get(std::string_view key) const;
  /// "data.train.path (run.toml:7)", for messages about a bad value.
  std::string where(std::string_view key) const;
  const std::map<std::string, Param, std::less<>>& entries() const noexcept { return values_; }

  // Convenience accessors with the common conversions.
  std::int64_t get_int(std::string_view key) const { return get<std::int64_t>(key); }
  double get_float(std::string_view key) const { return get<double>(key); }
  bool get_bool(std::string_view key) const { return get<bool>(key); }
  const std::string& get_string(std::string_view key) const { return get<std::string>(key); }

 private:
  const Param& find(std::string_view key) const;
  [[noreturn]] void type_mismatch(std::string_view key, const char* wanted) const;

  std::string table_;
  std::map<std::string, Param, std::less<>> values_;
};

/// Human name of a parameter's C++ type, for messages.
template <class T>
constexpr const char* param_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "integer";
  else if constexpr (std::is_same_v<T, double>) return "float";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return "integer list";
  else if constexpr (std::is_same_v<T, std::vector<double>>) return "float list";
  else return "string list";
}

template <class T>
const T& ParamMap::get(std::string_view key) const {
  const Param& p = find(key);
  if (const T* v = std::get_if<T>(&p.value)) return *v;
  type_mismatch(key, param_type_name<T>());
}

}  // namespace kiln
