// Run configuration: a TOML file plus --set overrides, validated table by table.
//
// The core and each plugin declare their table's keys as a schema (kiln_param_spec_v1). A
// table is validated when the wiring asks for it: unknown keys are errors with a "did you
// mean" and file:line; wrong types name the key, the expected and the found type; missing
// required keys are errors; defaults are filled in. After wiring, check_all_consumed() rejects
// tables nobody asked for ("[optimiser] at run.toml:20: unknown table (did you mean
// [optimizer]?)"). resolved_toml() is the config with every default written out, which the run
// directory keeps as config.toml.
//
// Overrides: "--set a.b.c=value"; the value is parsed as a TOML value (42, 0.1, true, [1, 2],
// "text") and, when it does not parse as one, taken as a bare string (so --set comm.type=gloo
// works). Their origin in messages is "--set a.b.c".
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::config {

class Config {
 public:
  /// Parses `file` and applies `overrides`. Throws ConfigError (with file:line:column for syntax
  /// errors) or IoError if the file cannot be read.
  static Config load(const std::filesystem::path& file, const std::vector<std::string>& overrides);
  /// Same from text; `source_name` stands in for the file name in messages.
  static Config parse(std::string_view text, const std::string& source_name,
                      const std::vector<std::string>& overrides);

  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;
  ~Config();

  /// The file (or source name) the config came from.
  const std::string& source() const;
  /// Lines to log about what overrides did beyond setting their own key, e.g. "--set
  /// backend.type=cuda replaced the file's 'cpu': dropped its keys threads (samples/x.toml:15)".
  const std::vector<std::string>& notes() const;
  /// Where dotted `key` was written, for messages: "run.toml:4:8", "--set model.type" for an
  /// override, or the file's name alone for a key the file does not have (a default).
  std::string where(std::string_view key) const;
  /// Whether dotted `table` ("data.eval") exists.
  bool has_table(std::string_view table) const;
  /// The `type` string of plugin table `table`. Throws ConfigError if the table or its `type` is
  /// missing or not a string. Marks `table` as a plugin table (see validate()).
  std::string plugin_type(std::string_view table) const;
  /// Same, but a missing table or a table without `type` yields `fallback` (an optional plugin
  /// such as [precision] defaulting to "fp32"); resolved_toml() then writes type = fallback.
  /// A `type` that is not a string is still an error.
  std::string plugin_type(std::string_view table, std::string_view fallback) const;
  /// Same, for a table whose types the core implements itself ([optimizer], [schedule]): a type
  /// not in `choices` is a ConfigError at the key's file:line, with a "did you mean".
  std::string plugin_type(std::string_view table, std::string_view fallback,
                          std::span<const std::string_view> choices) const;
  /// Validates `table` against `schema` and returns its values with defaults filled in. A table
  /// is a plugin table once plugin_type() was asked for it (the wiring always does so first, to
  /// pick the schema): there the key `type` is allowed, not returned, and kept for
  /// resolved_toml(); in any other table `type` is an ordinary key. A missing table is treated
  /// as empty (all defaults; an error if a key is required). Marks the table consumed and
  /// records the resolved values for resolved_toml(); validating a table again replaces them.
  ParamMap validate(std::string_view table, std::span<const kiln_param_spec_v1> schema);
  /// Removes from `table` each key of `specs` that holds exactly its spec's default, before the
  /// table is validated against a schema without those keys. For a core table whose keys depend
  /// on its type ([schedule]): a value equal to another type's default changes nothing, and
  /// config.toml files written when the table listed every type's keys still load. Any other
  /// value of such a key stays, and validation refuses it as an unknown key.
  void drop_defaults(std::string_view table, std::span<const kiln_param_spec_v1> specs);
  /// Throws ConfigError for the first table or key that no validate() call consumed, with a
  /// "did you mean" against the consumed tables.
  void check_all_consumed() const;
  /// The resolved configuration (validated tables with defaults, plugin `type`s) as TOML text.
  std::string resolved_toml() const;

 private:
  struct Impl;
  explicit Config(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Whether `s` is a TOML bare key: one or more ASCII letters, digits, '_' and '-'. Also what a
/// plugin's name and parameter names must be (the registry checks descriptors with it).
bool is_bare_key(std::string_view s);

/// " (did you mean 'x'?)" for the closest candidate within edit distance 2 (or a third of the
/// word's length, if larger), else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// Parses a TOML literal (a schema default such as "[128]" or "\"relu\"") into a ParamValue of
/// `type`. Throws ConfigError if it does not parse or has another type.
ParamValue parse_literal(std::string_view literal, std::uint32_t type, std::string_view what);

/// The values a string (or string list) parameter may take, from its schema's `choices`
/// ("drop|pad|partial"); empty when any value is allowed.
std::vector<std::string> param_choices(const kiln_param_spec_v1& spec);

/// "integer", "float list", ... for a kiln_param_type.
std::string_view param_type_name(std::uint32_t type) noexcept;
/// The range a parameter's values must lie in, for `kiln plugins show` and messages: "> 0",
/// "in [0, 1), finite", "finite"; empty when any value is allowed.
std::string param_range_text(const kiln_param_spec_v1& spec);

}  // namespace kiln::config
