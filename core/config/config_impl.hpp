// Private state of kiln::config::Config, shared by the files that implement it.
//
// The parsed document and --set overrides live in one toml::table. Overridden nodes carry
// source regions of the scratch text they were parsed from, so their origin is kept apart in
// `override_origins` (dotted path -> "--set a.b"); where() consults it before any region.
// plugin_type() is const but records which tables are plugin tables and which table names the
// wiring asked about: both only refine later messages and validation, hence `mutable`.
#pragma once

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/config/config.hpp"

namespace kiln::config {

/// One validate() result, kept in call order for resolved_toml().
struct ValidatedTable {
  std::string name;                 // dotted, e.g. "data.train"
  ParamMap values;                  // with defaults
  std::optional<std::string> type;  // plugin tables only
};

struct Config::Impl {
  std::string source;  // file name (or source name) used in every message
  std::filesystem::path dir;  // absolute folder of `source`: relative path values in it start here
  toml::table root;
  std::map<std::string, std::string, std::less<>> override_origins;
  // dotted path -> why its --set text was taken as a bare string (toml++'s parse error)
  std::map<std::string, std::string, std::less<>> bare_string_reasons;
  std::vector<std::string> notes;  // what overrides changed beyond their own key (Config::notes)
  std::vector<ValidatedTable> validated;
  mutable std::map<std::string, std::optional<std::string>, std::less<>> plugin_tables;  // -> fallback
  mutable std::set<std::string, std::less<>> asked_tables;  // did-you-mean candidates

  /// "--set a.b" if `path` (or a table above it) came from an override, else nullopt.
  std::optional<std::string> override_origin(std::string_view path) const;
  /// "run.toml:12:3" for messages ("run.toml" when the region is unknown, "--set a.b" for
  /// overrides).
  std::string where(std::string_view path, const toml::source_region& region) const;
  /// "run.toml:12" / "--set a.b": a Param's origin.
  std::string origin(std::string_view path, const toml::source_region& region) const;
  /// The node at dotted `path`, or nullptr. Throws ConfigError if a segment above the last is
  /// not a table (`for_what` names what was being looked up).
  const toml::node* find(std::string_view path, std::string_view for_what) const;
  /// Throws ConfigError at the first key or string value (dotted `path` for `node`) holding a NUL.
  void refuse_nul_characters(const toml::node& node, const std::string& path) const;
  /// Applies one "--set a.b.c=value".
  void apply_override(const std::string& text);
  /// After "--set <table>.type=<new>" replaced <old>: removes <table>'s keys that did not come
  /// from overrides (they were written for <old>) and records a note.
  void drop_keys_of_replaced_plugin(const std::string& type_key, const std::string& old_name,
                                    const std::string& new_name);
};

/// Splits "a.b.c" at dots.
std::vector<std::string> split_path(std::string_view path);
/// Closest candidate within the did_you_mean() threshold, or nullopt.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace kiln::config
