// Loading a config: reading the file, parsing it with toml++, applying --set overrides, and
// the lookups the wiring does before validation (has_table, plugin_type).
//
// An override value is parsed as the TOML document "v = <value>"; anything that is not exactly
// one TOML value (or is a date/time, which no schema type accepts) is taken as a bare string,
// so `--set comm.type=gloo` and `--set run.run_dir=runs/x` need no quoting. Why it was not a
// TOML value is kept, for the message when the key wanted a number or a list
// (`--set optimizer.lr=1e400` is a string because 1e400 is out of range).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_impl.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/file_kind.hpp"
#include "paths.hpp"
#include "values.hpp"

namespace kiln::config {
namespace {

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

/// Whether override text starts as a TOML number, array, inline table or quoted string would: a
/// bare word (`gloo`, `lots`) is text on purpose, but `1e400` or `[1, 2` was meant as a value.
bool looks_like_a_value(std::string_view value) {
  return !value.empty() && std::string_view("0123456789+-.[{\"'").find(value.front()) != std::string_view::npos;
}

/// Inserts the override's value at `key` in `table`, replacing what was there. Returns why text
/// that looks like a value was taken as a bare string ("it is not a TOML value (<toml++'s
/// reason>)"), or nullopt.
std::optional<std::string> insert_value(toml::table& table, const std::string& key, std::string_view value) {
  std::string reason;
  try {
    toml::table doc = toml::parse(fmt::format("v = {}", value), std::string_view("--set"));
    toml::node* node = doc.get("v");
    const bool temporal = node != nullptr && (node->is_date() || node->is_time() || node->is_date_time());
    if (node != nullptr && doc.size() == 1 && !temporal) {
      node->visit([&](auto&& n) { table.insert_or_assign(key, std::move(n)); });
      return std::nullopt;
    }
    reason = temporal ? "TOML reads it as a date or time, which no key takes" : "it is more than one TOML value";
  } catch (const toml::parse_error& e) {
    // Not a TOML value: a bare string. toml++'s description says why (a number out of range, an
    // unclosed array), for when the schema wanted something else.
    reason = fmt::format("it is not a TOML value ({})", e.description());
  }
  table.insert_or_assign(key, std::string(value));
  if (!looks_like_a_value(value)) return std::nullopt;
  return reason;
}

}  // namespace

bool is_bare_key(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    parts.emplace_back(path.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::optional<std::string> Config::Impl::override_origin(std::string_view path) const {
  // The longest overridden prefix wins: a key inside an inline table given by --set reports
  // that --set, while a later --set of the key itself reports its own.
  std::string_view p = path;
  while (true) {
    if (auto it = override_origins.find(p); it != override_origins.end()) return it->second;
    const std::size_t dot = p.rfind('.');
    if (dot == std::string_view::npos) return std::nullopt;
    p = p.substr(0, dot);
  }
}

std::string Config::Impl::where(std::string_view path, const toml::source_region& region) const {
  if (auto o = override_origin(path)) return *o;
  if (region.begin.line == 0) return source;
  return fmt::format("{}:{}:{}", source, region.begin.line, region.begin.column);
}

std::string Config::Impl::origin(std::string_view path, const toml::source_region& region) const {
  if (auto o = override_origin(path)) return *o;
  if (region.begin.line == 0) return source;
  return fmt::format("{}:{}", source, region.begin.line);
}

const toml::node* Config::Impl::find(std::string_view path, std::string_view for_what) const {
  const toml::node* node = &root;
  std::string walked;
  for (const std::string& part : split_path(path)) {
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      throw ConfigError(fmt::format("{}: {} must be a table to hold {}, found {}",
                                    where(walked, node->source()), walked, for_what,
                                    found_name(*node)));
    }
    node = table->get(part);
    if (node == nullptr) return nullptr;
    walked += walked.empty() ? part : "." + part;
  }
  return node;
}

void Config::Impl::apply_override(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw ConfigError(fmt::format("--set {}: an override needs the form key=value, e.g. "
                                  "--set optimizer.lr=0.05",
                                  text));
  }
  const std::string key(trim(std::string_view(text).substr(0, eq)));
  const std::string_view value = trim(std::string_view(text).substr(eq + 1));
  const std::vector<std::string> parts = split_path(key);
  for (const std::string& part : parts) {
    if (!is_bare_key(part)) {
      throw ConfigError(fmt::format("--set {}: '{}' is not a valid key; give a dotted path of "
                                    "bare keys (letters, digits, _ and -), e.g. model.hidden",
                                    text, key));
    }
  }
  const std::string origin = "--set " + key;
  // Swapping a plugin from the command line (--set backend.type=cuda) must work on a file written
  // for another plugin: the file's keys for the old plugin (cpu's `threads`) would otherwise be
  // unknown keys of the new one. They are dropped, and said so (notes()); the resolved
  // config.toml then holds only the new plugin's keys, so it reruns as it is.
  std::optional<std::string> old_type;
  if (parts.size() >= 2 && parts.back() == "type") {
    if (const toml::node* n = root.at_path(key).node(); n != nullptr && n->is_string()) old_type = *n->value<std::string>();
  }
  toml::table* table = &root;
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += walked.empty() ? parts[i] : "." + parts[i];
    toml::node* node = table->get(parts[i]);
    if (node == nullptr) {
      node = table->insert(parts[i], toml::table{}).first->second.as_table();
      override_origins.emplace(walked, origin);  // a table this override created
    } else if (!node->is_table()) {
      throw ConfigError(fmt::format("--set {}: {} is {} ({}), not a table, so it cannot hold '{}'",
                                    text, walked, found_name(*node), where(walked, node->source()),
                                    parts[i + 1]));
    }
    table = node->as_table();
  }
  if (auto reason = insert_value(*table, parts.back(), value)) {
    bare_string_reasons.insert_or_assign(key, std::move(*reason));
  } else {
    bare_string_reasons.erase(key);
  }
  if (old_type) {
    const auto new_type = table->get(parts.back())->value<std::string>();
    if (new_type && *new_type != *old_type) drop_keys_of_replaced_plugin(key, *old_type, *new_type);
  }
  // Origins recorded below a replaced node are stale; the new value's origin covers them.
  const std::string below = key + ".";
  for (auto it = override_origins.lower_bound(below);
       it != override_origins.end() && it->first.compare(0, below.size(), below) == 0;) {
    it = override_origins.erase(it);
  }
  for (auto it = bare_string_reasons.lower_bound(below);
       it != bare_string_reasons.end() && it->first.compare(0, below.size(), below) == 0;) {
    it = bare_string_reasons.erase(it);
  }
  override_origins.insert_or_assign(key, origin);
}

Config::Config(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;
Config::~Config() = default;

Config Config::load(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  // Opening a FIFO blocks until something writes to it, and a device such as /dev/zero never
  // ends: only a regular file (or a link to one) is read.
  if (const std::string kind = io::not_a_regular_file(file); !kind.empty()) {
    throw IoError(fmt::format("config file '{}' is {}; give the path of a TOML file", file.string(), kind));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw IoError(fmt::format("cannot read config file '{}': {}; check the path", file.string(),
                              std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    throw IoError(fmt::format("cannot read config file '{}': read failed", file.string()));
  }
  return parse(text.str(), file.string(), overrides);
}

Config Config::parse(std::string_view text, const std::string& source_name,
                     const std::vector<std::string>& overrides) {
  auto impl = std::make_unique<Impl>();
  impl->source = source_name;
  impl->dir = config_dir(source_name);
  try {
    impl->root = toml::parse(text, std::string_view(source_name));
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}:{}: {}", source_name, e.source().begin.line,
                                  e.source().begin.column, e.description()));
  }
  for (const std::string& o : overrides) impl->apply_override(o);
  impl->refuse_nul_characters(impl->root, "");
  return Config(std::move(impl));
}

// TOML lets a string hold U+0000 ("\u0000"), but values end up as C strings, which end there: the
// operating system opened path = "/data\u0000x" as "/data" without a word, and an error message
// quoting such a value was printed cut short at it.
void Config::Impl::refuse_nul_characters(const toml::node& node, const std::string& path) const {
  const auto refuse = [&](std::string_view what, std::string_view text, const toml::source_region& region) {
    throw ConfigError(fmt::format("{}: {} holds a NUL character (\\u0000) at character {}; no key, path, name or "
                                  "choice can contain one",
                                  where(path, region), what, text.find('\0') + 1));
  };
  if (const toml::table* table = node.as_table()) {
    for (auto&& [key, value] : *table) {
      const std::string name(key.str());
      const std::string child = path.empty() ? name : path + "." + name;
      if (name.find('\0') != std::string::npos) {
        const std::string start = name.substr(0, name.find('\0'));
        refuse(path.empty() ? fmt::format("the top-level key '{}'", start) : fmt::format("the key '{}' of [{}]", start, path),
               name, value.source());
      }
      refuse_nul_characters(value, child);
    }
  } else if (const toml::array* array = node.as_array()) {
    for (const toml::node& element : *array) refuse_nul_characters(element, path);
  } else if (const auto* text = node.as_string(); text != nullptr && text->get().find('\0') != std::string::npos) {
    refuse(fmt::format("{} = '{}'", path, text->get().substr(0, text->get().find('\0'))), text->get(), node.source());
  }
}

const std::string& Config::source() const { return impl_->source; }
const std::vector<std::string>& Config::notes() const { return impl_->notes; }

void Config::Impl::drop_keys_of_replaced_plugin(const std::string& type_key, const std::string& old_name,
                                                const std::string& new_name) {
  const std::string table_path = type_key.substr(0, type_key.size() - std::string("type").size() - 1);
  toml::node* node = root.at_path(table_path).node();
  if (node == nullptr || !node->is_table()) return;
  toml::table& table = *node->as_table();
  std::vector<std::string> names;
  std::string list;
  for (auto&& [k, v] : table) {
    const std::string name(k.str());
    if (name == "type" || v.is_table()) continue;  // nested tables are not plugin keys
    if (override_origin(table_path + "." + name)) continue;  // the user's own --set stays
    list += fmt::format("{}{} ({})", list.empty() ? "" : ", ", name, where(table_path + "." + name, v.source()));
    names.push_back(name);
  }
  for (const std::string& name : names) table.erase(name);
  if (!names.empty()) {
    notes.push_back(fmt::format("--set {}={} replaced the file's '{}', so its keys for '{}' were dropped: {}",
                                type_key, new_name, old_name, old_name, list));
  }
}

bool Config::has_table(std::string_view table) const {
  impl_->asked_tables.emplace(table);
  const toml::node* node = impl_->find(table, fmt::format("[{}]", table));
  return node != nullptr && node->is_table();
}

std::string Config::plugin_type(std::string_view table) const {
  const Impl& I = *impl_;
  I.asked_tables.emplace(table);
  I.plugin_tables.try_emplace(std::string(table));
  const toml::node* node = I.find(table, fmt::format("[{}]", table));
  if (node == nullptr) {
    throw ConfigError(fmt::format("{}: config has no [{}] table; add one with type = \"...\" "
                                  "(`kiln plugins list` shows the plugins)",
                                  I.source, table));
  }
  const toml::table* t = node->as_table();
  if (t == nullptr) {
    throw ConfigError(fmt::format("{}: {} must be a table with type = \"...\", found {}",
                                  I.where(table, node->source()), table, found_name(*node)));
  }
  const toml::node* type = t->get("type");
  if (type == nullptr) {
    throw ConfigError(fmt::format("{}: [{}] has no type; add type = \"...\" naming its plugin "
                                  "(`kiln plugins list` shows them)",
                                  I.where(table, t->source()), table));
  }
  const std::string path = fmt::format("{}.type", table);
  if (!type->is_string()) {
    throw ConfigError(fmt::format("{}: [{}] type must be a string naming a plugin, found {}",
                                  I.where(path, type->source()), table, found_name(*type)));
  }
  return *type->value<std::string>();
}

std::string Config::plugin_type(std::string_view table, std::string_view fallback) const {
  const Impl& I = *impl_;
  const toml::node* node = I.find(table, fmt::format("[{}]", table));
  const toml::table* t = node != nullptr ? node->as_table() : nullptr;
  if (t == nullptr || t->get("type") == nullptr) {
    if (node != nullptr && t == nullptr) return plugin_type(table);  // reports the non-table
    I.asked_tables.emplace(table);
    I.plugin_tables.insert_or_assign(std::string(table), std::string(fallback));
    return std::string(fallback);
  }
  return plugin_type(table);
}

std::string Config::where(std::string_view key) const {
  const Impl& I = *impl_;
  const toml::node* node = nullptr;
  try {
    node = I.find(key, key);
  } catch (const ConfigError&) {
    // A segment above the key is not a table: there is no such key, so the file is all we know.
  }
  return I.where(key, node != nullptr ? node->source() : toml::source_region{});
}

std::string Config::plugin_type(std::string_view table, std::string_view fallback,
                                std::span<const std::string_view> choices) const {
  std::string type = plugin_type(table, fallback);
  const std::vector<std::string> names(choices.begin(), choices.end());
  if (std::find(names.begin(), names.end(), type) != names.end()) return type;
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  throw ConfigError(fmt::format("{}: [{}] type = '{}' is not one of {}{}", where(fmt::format("{}.type", table)), table,
                                type, list, did_you_mean(type, names)));
}

}  // namespace kiln::config
