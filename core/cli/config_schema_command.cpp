// `kiln config schema` (see config_schema_command.hpp).
#include "config_schema_command.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/early_stop.hpp"
#include "kiln/train/lr_schedule.hpp"
#include "kiln/train/model_table.hpp"
#include "kiln/train/optimizer.hpp"
#include "kiln/train/weight_ema.hpp"

namespace kiln::cli {
namespace {

using Spec = kiln_param_spec_v1;

std::string number(double v) { return fmt::format("{}", v); }

/// A schema default as JSON (a non-finite float as null: JSON has no infinity).
struct JsonOfValue {
  std::string operator()(bool b) const { return b ? "true" : "false"; }
  std::string operator()(std::int64_t i) const { return std::to_string(i); }
  std::string operator()(double d) const { return std::isfinite(d) ? number(d) : "null"; }
  std::string operator()(const std::string& s) const { return io::json_quoted(s); }
  template <class T>
  std::string operator()(const std::vector<T>& list) const {
    std::string out = "[";
    for (std::size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + (*this)(list[i]);
    return out + "]";
  }
};

std::string json_value(const ParamValue& value) { return std::visit(JsonOfValue{}, value); }

std::string enum_of(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + io::json_quoted(names[i]);
  return out + "]";
}

/// The JSON Schema of one value of `type` (an element, for lists), with choices and bounds.
std::string value_schema(const Spec& spec, std::uint32_t type) {
  std::string out;
  switch (type) {
    case KILN_PARAM_BOOL: out = "\"type\": \"boolean\""; break;
    case KILN_PARAM_INT: out = "\"type\": \"integer\""; break;
    case KILN_PARAM_FLOAT: out = "\"type\": \"number\""; break;
    default: out = "\"type\": \"string\""; break;
  }
  if (const auto choices = config::param_choices(spec); !choices.empty()) out += ", \"enum\": " + enum_of(choices);
  if (type == KILN_PARAM_INT || type == KILN_PARAM_FLOAT) {
    if (spec.min != nullptr) {
      out += ", \"minimum\": " + number(std::strtod(spec.min, nullptr));
      if (spec.flags & KILN_PARAM_MIN_EXCLUSIVE) out += ", \"exclusiveMinimum\": true";
    }
    if (spec.max != nullptr) {
      out += ", \"maximum\": " + number(std::strtod(spec.max, nullptr));
      if (spec.flags & KILN_PARAM_MAX_EXCLUSIVE) out += ", \"exclusiveMaximum\": true";
    }
  }
  return out;
}

std::string key_schema(const Spec& spec) {
  std::string out = "{";
  switch (spec.type) {
    case KILN_PARAM_INT_LIST: out += "\"type\": \"array\", \"items\": {" + value_schema(spec, KILN_PARAM_INT) + "}"; break;
    case KILN_PARAM_FLOAT_LIST:
      out += "\"type\": \"array\", \"items\": {" + value_schema(spec, KILN_PARAM_FLOAT) + "}";
      break;
    case KILN_PARAM_STRING_LIST:
      out += "\"type\": \"array\", \"items\": {" + value_schema(spec, KILN_PARAM_STRING) + "}";
      break;
    default: out += value_schema(spec, spec.type); break;
  }
  if (spec.doc != nullptr) out += ", \"description\": " + io::json_quoted(spec.doc);
  if (spec.default_value != nullptr) {
    out += ", \"default\": " + json_value(config::parse_literal(spec.default_value, spec.type, spec.name));
  }
  return out + "}";
}

/// "\"key\": {...}, ..." for every key of `schemas`.
std::string properties(std::initializer_list<std::span<const Spec>> schemas) {
  std::string out;
  for (const auto& schema : schemas) {
    for (const Spec& spec : schema) out += (out.empty() ? "" : ",\n      ") + io::json_quoted(spec.name) + ": " + key_schema(spec);
  }
  return out;
}

/// A table whose keys are exactly `schemas`' (plus `type` when `type_property` is given).
std::string closed_table(std::initializer_list<std::span<const Spec>> schemas, const std::string& type_property = "") {
  std::string props = properties(schemas);
  if (!type_property.empty()) props = "\"type\": " + type_property + (props.empty() ? "" : ",\n      " + props);
  return "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {\n      " + props + "}}";
}

/// One variant of a table chosen by `type`: that type's keys only; `type` may be left out only
/// for the default variant.
std::string variant(const std::string& name, bool is_default, std::initializer_list<std::span<const Spec>> schemas) {
  std::string t = closed_table(schemas, "{\"enum\": [" + io::json_quoted(name) + "]}");
  if (!is_default) t.insert(t.size() - 1, ", \"required\": [\"type\"]");
  return t;
}

struct Variant {
  std::string name;
  std::span<const Spec> keys;
};

/// A table chosen by `type` among `variants` (`fallback`: the type when none is written).
std::string chosen_table(const std::string& what, const std::vector<Variant>& variants, const std::string& fallback,
                         std::span<const Spec> host_keys = {}) {
  std::vector<std::string> names;
  std::string branches;
  for (const auto& v : variants) {
    names.push_back(v.name);
    branches += (branches.empty() ? "" : ",\n    ") + variant(v.name, v.name == fallback, {v.keys, host_keys});
  }
  std::string out = "{\"type\": \"object\", \"description\": " + io::json_quoted(what) +
                    ", \"properties\": {\"type\": {\"type\": \"string\", \"enum\": " + enum_of(names);
  if (!fallback.empty()) out += ", \"default\": " + io::json_quoted(fallback);
  out += "}},\n    \"anyOf\": [\n    " + branches + "]}";
  return out;
}

std::vector<Variant> plugins_of(const plugin::Registry& registry, std::uint32_t kind) {
  std::vector<Variant> out;
  for (const auto& info : registry.plugins()) {
    if (info.kind == kind) out.push_back({info.name, info.params});
  }
  return out;
}

void write_schema(const plugin::Registry& registry, std::ostream& out) {
  std::vector<Variant> optimizers, schedules;
  for (std::string_view type : train::optimizer_types()) {
    optimizers.push_back({std::string(type), train::optimizer_schema(std::string(type))});
  }
  for (std::string_view type : train::schedule_types()) {
    schedules.push_back({std::string(type), train::schedule_schema(std::string(type))});
  }
  const std::string data_table = chosen_table("a data source plugin", plugins_of(registry, KILN_KIND_DATA), "");
  const std::map<std::string, std::string> tables = {
      {"run", closed_table({train::run_schema()})},
      {"loader", closed_table({train::loader_schema()})},
      {"loss", closed_table({train::loss_schema()})},
      {"log", closed_table({train::log_schema()})},
      {"dist", closed_table({train::dist_schema()})},
      {"checkpoint", closed_table({train::checkpoint_schema()})},
      {"early_stop", closed_table({train::early_stop_schema()})},
      {"ema", closed_table({train::ema_schema()})},
      {"optimizer", chosen_table("the optimizer", optimizers, "adam")},
      {"schedule", chosen_table("the learning-rate schedule", schedules, "constant")},
      {"backend", chosen_table("the compute backend plugin", plugins_of(registry, KILN_KIND_BACKEND), "cpu")},
      {"model", chosen_table("the model plugin, and the keys Kiln reads itself (init, freeze, frozen_bn, sync_bn)",
                             plugins_of(registry, KILN_KIND_MODEL), "", train::model_host_schema())},
      {"data", "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {\"train\": " + data_table +
                   ",\n    \"eval\": " + data_table + "}}"},
      {"comm", chosen_table("the communicator plugin", plugins_of(registry, KILN_KIND_COMMUNICATOR), "local")},
      {"precision", chosen_table("the precision policy plugin", plugins_of(registry, KILN_KIND_PRECISION), "fp32")},
  };
  out << "{\"$schema\": \"http://json-schema.org/draft-04/schema#\",\n"
      << " \"title\": \"Kiln training config (kiln train --config)\",\n"
      << " \"description\": \"Written by `kiln config schema` from the core's tables and the plugins on its search "
         "path; docs/configuration.md describes every key.\",\n"
      << " \"type\": \"object\", \"additionalProperties\": false, \"properties\": {\n";
  std::size_t i = 0;
  for (const auto& [name, schema] : tables) out << (i++ ? ",\n  " : "  ") << io::json_quoted(name) << ": " << schema;
  out << "}}\n";
}

}  // namespace

int run_config_command(const std::vector<std::string>& args,
                       const std::vector<std::filesystem::path>& plugin_path_dirs, std::ostream& out) {
  constexpr const char* kUsage = "usage: kiln config schema   (a JSON Schema of the training config on stdout)";
  if (std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    out << kUsage << "\n\nWith the plugins found on the search path (--plugin-path, KILN_PLUGIN_PATH, the install's);\n"
                     "an editor given it completes and checks config files (docs/configuration.md).\n";
    return 0;
  }
  if (args.size() != 1 || args[0] != "schema") throw ConfigError(std::string("kiln config: ") + kUsage);
  plugin::Registry registry(plugin::default_search_path(plugin_path_dirs));
  registry.scan();
  write_schema(registry, out);
  return 0;
}

}  // namespace kiln::cli
