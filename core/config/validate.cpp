// Schema validation of one table, and the final check that every table was consumed.
//
// validate() reports the first problem in the table's own key order (toml++ keeps keys
// sorted), unknown keys before missing ones, so a typo'd required key is reported as the typo
// with its suggestion rather than as "missing". check_all_consumed() reports the problem that
// comes first in the file, so fixing errors top to bottom converges.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <tuple>

#include "config_impl.hpp"
#include "kiln/errors.hpp"
#include "paths.hpp"
#include "ranges.hpp"
#include "values.hpp"

namespace kiln::config {
namespace {

std::vector<std::string> split_choices(const char* choices) {
  std::vector<std::string> out;
  if (choices == nullptr || *choices == '\0') return out;
  std::string_view rest(choices);
  while (true) {
    const std::size_t bar = rest.find('|');
    out.emplace_back(rest.substr(0, bar));
    if (bar == std::string_view::npos) break;
    rest = rest.substr(bar + 1);
  }
  return out;
}

/// Checks the schema itself: names present and unique, known types, no `type` in a plugin's.
void check_schema(std::string_view table, std::span<const kiln_param_spec_v1> schema,
                  bool plugin_table) {
  for (std::size_t i = 0; i < schema.size(); ++i) {
    const kiln_param_spec_v1& spec = schema[i];
    if (spec.name == nullptr || *spec.name == '\0') {
      throw ConfigError(fmt::format("the schema of [{}] has an entry without a name (index {}); "
                                    "fix the schema",
                                    table, i));
    }
    if (!is_param_type(spec.type)) {
      throw ConfigError(fmt::format("the schema of [{}] gives '{}' the unknown type {}; fix the "
                                    "schema",
                                    table, spec.name, spec.type));
    }
    if (plugin_table && std::string_view(spec.name) == "type") {
      throw ConfigError(fmt::format("the schema of plugin table [{}] declares 'type', which selects "
                                    "the plugin and belongs to no schema; remove it from the schema",
                                    table));
    }
    // A path is resolved against the config's folder before it is stored, so a choice could never
    // match what resolved_toml() writes back (found by tests/fuzz, target plugin_schema).
    if (spec.choices != nullptr && *spec.choices != '\0' && spec.type != KILN_PARAM_STRING &&
        spec.type != KILN_PARAM_STRING_LIST) {
      throw ConfigError(fmt::format("the schema of [{}]: '{}' is a {} with choices, which only strings and string "
                                    "lists can have; fix the schema",
                                    table, spec.name, param_type_name(spec.type)));
    }
    if (const std::string problem = range_spec_problem(spec); !problem.empty()) {
      throw ConfigError(fmt::format("the schema of [{}]: '{}' {}; fix the schema", table, spec.name, problem));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (std::string_view(schema[j].name) == spec.name) {
        throw ConfigError(fmt::format("the schema of [{}] declares '{}' twice; fix the schema",
                                      table, spec.name));
      }
    }
  }
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += out.empty() ? s : ", " + s;
  return out;
}

/// Whether a string value (or each element of a string list) is among `choices`; on failure
/// the offending node and index.
struct ChoiceMiss {
  const toml::node* node = nullptr;
  std::optional<std::size_t> index;
  std::string value;
};

std::optional<ChoiceMiss> check_choices(const ParamValue& value, const toml::node* node,
                                        const std::vector<std::string>& choices) {
  if (choices.empty()) return std::nullopt;
  auto allowed = [&](const std::string& s) {
    return std::find(choices.begin(), choices.end(), s) != choices.end();
  };
  if (const auto* s = std::get_if<std::string>(&value)) {
    if (!allowed(*s)) return ChoiceMiss{node, std::nullopt, *s};
  } else if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      if (!allowed((*list)[i])) {
        const toml::node* elem = node != nullptr && node->is_array() ? node->as_array()->get(i) : node;
        return ChoiceMiss{elem, i, (*list)[i]};
      }
    }
  }
  return std::nullopt;
}

std::string indexed(std::string_view key, std::optional<std::size_t> index) {
  return index ? fmt::format("{}[{}]", key, *index) : std::string(key);
}

}  // namespace

ParamMap Config::validate(std::string_view table, std::span<const kiln_param_spec_v1> schema) {
  Impl& I = *impl_;
  const auto plugin_it = I.plugin_tables.find(table);
  const bool plugin_table = plugin_it != I.plugin_tables.end();
  check_schema(table, schema, plugin_table);

  const toml::node* node = I.find(table, fmt::format("[{}]", table));
  if (node != nullptr && !node->is_table()) {
    throw ConfigError(fmt::format("{}: {} must be a table, found {}", I.where(table, node->source()),
                                  table, found_name(*node)));
  }
  const toml::table* t = node != nullptr ? node->as_table() : nullptr;

  ValidatedTable result{std::string(table), ParamMap(std::string(table)), std::nullopt};
  if (plugin_table) result.type = plugin_it->second;  // the fallback, if plugin_type() gave one

  auto spec_of = [&](std::string_view key) -> const kiln_param_spec_v1* {
    for (const kiln_param_spec_v1& s : schema) {
      if (key == s.name) return &s;
    }
    return nullptr;
  };

  if (t != nullptr) {
    for (auto&& [k, value] : *t) {
      const std::string key(k.str());
      const std::string path = fmt::format("{}.{}", table, key);
      if (plugin_table && key == "type") {
        if (!value.is_string()) {
          throw ConfigError(fmt::format("{}: [{}] type must be a string naming a plugin, found {}",
                                        I.where(path, value.source()), table, found_name(value)));
        }
        result.type = *value.value<std::string>();
        continue;
      }
      const kiln_param_spec_v1* spec = spec_of(key);
      if (spec == nullptr) {
        std::vector<std::string> names;
        for (const kiln_param_spec_v1& s : schema) names.emplace_back(s.name);
        std::vector<std::string> candidates = names;
        if (plugin_table) candidates.emplace_back("type");
        std::sort(names.begin(), names.end());
        const std::string valid =
            names.empty() ? std::string(plugin_table ? "this plugin takes no keys besides type"
                                                     : "this table takes no keys")
                          : "valid keys: " + joined(names);
        throw ConfigError(fmt::format("{}: unknown key '{}' in [{}]{}; {}", I.where(path, k.source()),
                                      key, table, did_you_mean(key, candidates), valid));
      }
      Conversion c = to_param(value, spec->type);
      if (!c.value) {
        std::string hint;
        if (is_list_type(spec->type) && !c.index && to_param(value, element_type(spec->type)).value) {
          hint = fmt::format("; write {} = [{}] for a one-element list", key, node_text(value));
        }
        if (c.bad == &value) {
          if (auto reason = I.bare_string_reasons.find(path); reason != I.bare_string_reasons.end()) {
            hint += fmt::format("; --set read it as text because {}", reason->second);
          }
        }
        throw ConfigError(fmt::format(
            "{}: [{}] {} must be {}, found {}{}", I.where(path, c.bad->source()), table,
            indexed(key, c.index),
            expected_name(c.index ? element_type(spec->type) : spec->type), found_name(*c.bad),
            hint));
      }
      const std::vector<std::string> choices = split_choices(spec->choices);
      if (auto miss = check_choices(*c.value, &value, choices)) {
        throw ConfigError(fmt::format("{}: [{}] {} = '{}' is not one of {}{}",
                                      I.where(path, miss->node->source()), table,
                                      indexed(key, miss->index), miss->value, joined(choices),
                                      did_you_mean(miss->value, choices)));
      }
      if (auto miss = check_range(*c.value, *spec)) {
        const toml::node* bad = miss->index && value.is_array() ? value.as_array()->get(*miss->index) : &value;
        throw ConfigError(fmt::format("{}: [{}] {} = {} is out of range: it {}", I.where(path, bad->source()), table,
                                      indexed(key, miss->index), miss->value, miss->rule));
      }
      if (spec->type == KILN_PARAM_PATH) {
        // A --set value is typed relative to the shell's working directory, a file's value
        // relative to the file (paths.hpp).
        const bool typed = I.override_origin(path).has_value();
        auto& text = std::get<std::string>(*c.value);
        text = anchor_path(text, typed ? std::filesystem::current_path() : I.dir);
      }
      result.values.set(key, std::move(*c.value), I.origin(path, k.source()));
    }
  }

  for (const kiln_param_spec_v1& spec : schema) {
    if (result.values.contains(spec.name)) continue;
    if (spec.default_value == nullptr) {
      const std::string loc = t != nullptr ? I.where(table, t->source()) : I.source;
      const std::string doc = spec.doc != nullptr && *spec.doc != '\0'
                                  ? fmt::format(" ({})", spec.doc)
                                  : std::string();
      throw ConfigError(fmt::format("{}: [{}] needs key '{}'{}; add {} = <{}> to [{}]", loc, table,
                                    spec.name, doc, spec.name, param_type_name(spec.type), table));
    }
    const std::string what =
        fmt::format("bad default in the schema of [{}] for key '{}'", table, spec.name);
    ParamValue value = parse_literal(spec.default_value, spec.type, what);
    if (spec.type == KILN_PARAM_PATH) {
      // A default belongs to no file: like a command-line value, it is relative to the
      // working directory.
      auto& text = std::get<std::string>(value);
      text = anchor_path(text, std::filesystem::current_path());
    }
    const std::vector<std::string> choices = split_choices(spec.choices);
    if (auto miss = check_choices(value, nullptr, choices)) {
      throw ConfigError(fmt::format("{}: '{}' is not one of {}", what, miss->value, joined(choices)));
    }
    if (auto miss = check_range(value, spec)) {
      throw ConfigError(fmt::format("{}: {} {}", what, miss->value, miss->rule));
    }
    result.values.set(spec.name, std::move(value), "default");
  }

  ParamMap out = result.values;
  auto same = [&](const ValidatedTable& v) { return v.name == table; };
  if (auto it = std::find_if(I.validated.begin(), I.validated.end(), same); it != I.validated.end()) {
    *it = std::move(result);
  } else {
    I.validated.push_back(std::move(result));
  }
  return out;
}

void Config::drop_defaults(std::string_view table, std::span<const kiln_param_spec_v1> specs) {
  toml::table* t = impl_->root.at_path(table).as_table();
  if (t == nullptr) return;
  for (const kiln_param_spec_v1& spec : specs) {
    const toml::node* node = t->get(spec.name);
    if (node == nullptr || spec.default_value == nullptr) continue;
    const Conversion c = to_param(*node, spec.type);
    const std::string what = fmt::format("bad default in the schema of [{}] for key '{}'", table, spec.name);
    if (c.value && *c.value == parse_literal(spec.default_value, spec.type, what)) t->erase(spec.name);
  }
}

void Config::check_all_consumed() const {
  const Impl& I = *impl_;
  std::vector<std::string> consumed;
  for (const ValidatedTable& v : I.validated) consumed.push_back(v.name);
  std::vector<std::string> candidates = consumed;
  for (const std::string& a : I.asked_tables) {
    if (std::find(candidates.begin(), candidates.end(), a) == candidates.end()) candidates.push_back(a);
  }
  auto is_consumed = [&](const std::string& path) {
    return std::find(consumed.begin(), consumed.end(), path) != consumed.end();
  };
  auto holds_consumed = [&](const std::string& path) {
    const std::string prefix = path + ".";
    return std::any_of(consumed.begin(), consumed.end(),
                       [&](const std::string& c) { return c.compare(0, prefix.size(), prefix) == 0; });
  };

  // (line, column, message); overrides have line 0 and sort after the file's problems.
  struct Problem {
    std::uint32_t line, column;
    std::string message;
  };
  std::vector<Problem> problems;
  auto add = [&](const std::string& path, const toml::source_region& region, std::string message) {
    const bool overridden = I.override_origin(path).has_value();
    const std::uint32_t line = overridden || region.begin.line == 0 ? UINT32_MAX : region.begin.line;
    problems.push_back({line, region.begin.column,
                        fmt::format("{}: {}", I.where(path, region), std::move(message))});
  };

  auto walk = [&](auto&& self, const toml::table& table, const std::string& prefix) -> void {
    for (auto&& [k, node] : table) {
      const std::string key(k.str());
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      if (is_consumed(path)) continue;  // validate() checked its keys
      const bool is_table = node.is_table() || node.is_array_of_tables();
      if (is_table && holds_consumed(path) && node.is_table()) {
        self(self, *node.as_table(), path);
      } else if (is_table) {
        std::string hint;
        if (auto c = closest(path, candidates)) hint = fmt::format(" (did you mean [{}]?)", *c);
        const char* brackets = node.is_table() ? "[" : "[[";
        const char* closing = node.is_table() ? "]" : "]]";
        add(path, node.source(),
            fmt::format("unknown table {}{}{}{}; no component reads it, remove it or fix its name",
                        brackets, path, closing, hint));
      } else if (prefix.empty()) {
        add(path, k.source(),
            fmt::format("key '{}' is outside any table; move it under its table (e.g. [run])", key));
      } else {
        add(path, k.source(),
            fmt::format("unknown key '{}' in [{}], which only holds tables", key, prefix));
      }
    }
  };
  walk(walk, I.root, "");
  if (problems.empty()) return;
  std::stable_sort(problems.begin(), problems.end(), [](const Problem& a, const Problem& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  std::string message = problems.front().message;
  if (problems.size() > 1) message += fmt::format(" ({} more problem(s) follow)", problems.size() - 1);
  throw ConfigError(message);
}

std::vector<std::string> param_choices(const kiln_param_spec_v1& spec) { return split_choices(spec.choices); }

}  // namespace kiln::config
