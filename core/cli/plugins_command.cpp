// `kiln plugins list|show|check|test`. Plain text is for people (aligned columns, gst-inspect
// layout); --json is for scripts and carries everything the text does, including failures.
// `test` is plugins_test_command.cpp's.
#include "plugins_command.hpp"

#include <algorithm>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "kiln/errors.hpp"
#include "kiln/config/config.hpp"
#include "kiln/io/json.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/model_table.hpp"
#include "plugins_test_command.hpp"

namespace kiln::cli {
namespace {

using plugin::PluginInfo;
using plugin::Registry;

// The config table that selects a plugin of `kind`.
std::string_view config_table(std::uint32_t kind) {
  switch (kind) {
    case KILN_KIND_BACKEND: return "[backend]";
    case KILN_KIND_MODEL: return "[model]";
    case KILN_KIND_DATA: return "[data.train] / [data.eval]";
    case KILN_KIND_COMMUNICATOR: return "[comm]";
    case KILN_KIND_PRECISION: return "[precision]";
    default: return "?";
  }
}

// Keys of the table that selects a plugin of `kind` which the host reads itself (the plugin
// never sees them): the fine-tuning keys of [model]; none for the other kinds.
std::span<const kiln_param_spec_v1> host_keys(std::uint32_t kind) {
  if (kind == KILN_KIND_MODEL) return train::model_host_schema();
  return {};
}

std::string json_or_null(const char* text) { return text ? io::json_quoted(text) : "null"; }

std::string abi_text(const PluginInfo& info) {
  return std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor);
}

void print_table(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
}

void list_text(const Registry& registry, std::ostream& out) {
  if (registry.plugins().empty()) {
    out << "No plugins found.\n";
  } else {
    std::vector<std::vector<std::string>> rows = {{"NAME", "KIND", "VERSION", "SUMMARY", "LIBRARY"}};
    for (const auto& info : registry.plugins()) {
      rows.push_back({info.name, std::string(plugin::kind_name(info.kind)), info.version,
                      info.summary, info.library.string()});
    }
    print_table(rows, out);
  }
  if (!registry.shadowed().empty()) {
    out << "\nShadowed (an earlier plugin of the same kind and name is used):\n";
    for (const auto& s : registry.shadowed()) {
      out << "  " << plugin::kind_name(s.plugin.kind) << " '" << s.plugin.name << "' "
          << s.plugin.version << " in " << s.plugin.library.string() << " (using "
          << s.winner.string() << ")\n";
    }
  }
  if (!registry.failures().empty()) {
    out << "\nFailed to load:\n";
    for (const auto& failure : registry.failures()) {
      out << "  " << failure.library.string() << "\n      " << failure.reason << '\n';
    }
  }
  out << "\nSearched:";
  for (const auto& dir : registry.search_path()) out << ' ' << dir.string();
  out << '\n';
}

void params_json(std::span<const kiln_param_spec_v1> params, std::ostream& out) {
  out << '[';
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    out << (i ? ", " : "") << "{\"name\": " << io::json_quoted(p.name)
        << ", \"type\": " << io::json_quoted(config::param_type_name(p.type))
        << ", \"default\": " << json_or_null(p.default_value)
        << ", \"choices\": " << json_or_null(p.choices) << ", \"doc\": " << json_or_null(p.doc)
        << ", \"min\": " << json_or_null(p.min) << ", \"max\": " << json_or_null(p.max)
        << ", \"range\": " << io::json_quoted(config::param_range_text(p))
        << '}';
  }
  out << ']';
}

void plugin_json(const PluginInfo& info, std::ostream& out) {
  out << "{\"name\": " << io::json_quoted(info.name)
      << ", \"kind\": " << io::json_quoted(plugin::kind_name(info.kind))
      << ", \"version\": " << io::json_quoted(info.version)
      << ", \"summary\": " << io::json_quoted(info.summary)
      << ", \"library\": " << io::json_quoted(info.library.string())
      << ", \"abi\": " << io::json_quoted(abi_text(info))
      << ", \"kiln_version\": " << io::json_quoted(info.kiln_version)
      << ", \"contract\": " << io::json_quoted(info.contract_fingerprint) << ", \"params\": ";
  params_json(info.params, out);
  out << ", \"host_params\": ";
  params_json(host_keys(info.kind), out);
  out << '}';
}

void list_json(const Registry& registry, std::ostream& out) {
  out << "{\"plugins\": [";
  for (std::size_t i = 0; i < registry.plugins().size(); ++i) {
    out << (i ? ",\n  " : "\n  ");
    plugin_json(registry.plugins()[i], out);
  }
  out << "],\n \"shadowed\": [";
  for (std::size_t i = 0; i < registry.shadowed().size(); ++i) {
    const auto& s = registry.shadowed()[i];
    out << (i ? ",\n  " : "\n  ") << "{\"plugin\": ";
    plugin_json(s.plugin, out);
    out << ", \"winner\": " << io::json_quoted(s.winner.string()) << '}';
  }
  out << "],\n \"failures\": [";
  for (std::size_t i = 0; i < registry.failures().size(); ++i) {
    const auto& f = registry.failures()[i];
    out << (i ? ",\n  " : "\n  ") << "{\"library\": " << io::json_quoted(f.library.string())
        << ", \"reason\": " << io::json_quoted(f.reason) << '}';
  }
  out << "],\n \"search_path\": [";
  for (std::size_t i = 0; i < registry.search_path().size(); ++i) {
    out << (i ? ", " : "") << io::json_quoted(registry.search_path()[i].string());
  }
  out << "]}\n";
}

/// `show NAME --json`: every plugin of that name (one per kind), each as in `list --json`.
void show_json(const std::vector<const PluginInfo*>& matches, std::ostream& out) {
  out << "{\"plugins\": [";
  for (std::size_t i = 0; i < matches.size(); ++i) {
    out << (i ? ",\n  " : "\n  ");
    plugin_json(*matches[i], out);
  }
  out << "]}\n";
}

void params_text(std::span<const kiln_param_spec_v1> params, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& p : params) width = std::max(width, std::string_view(p.name).size());
  for (const auto& p : params) {
    const std::string name = p.name;
    out << "  " << name << std::string(width - name.size() + 2, ' ') << config::param_type_name(p.type)
        << ", " << (p.default_value ? std::string("default ") + p.default_value : "required");
    if (p.choices) out << ", one of: " << p.choices;
    if (const std::string range = config::param_range_text(p); !range.empty()) out << ", " << range;
    out << '\n';
    if (p.doc) out << "  " << std::string(width + 2, ' ') << p.doc << '\n';
  }
}

void show_text(const PluginInfo& info, std::ostream& out) {
  const std::vector<std::vector<std::string>> header = {
      {"  Name", info.name},
      {"  Kind", std::string(plugin::kind_name(info.kind)) + " (selected with type = \"" +
                     info.name + "\" in " + std::string(config_table(info.kind)) + ")"},
      {"  Version", info.version},
      {"  Summary", info.summary},
      {"  Library", info.library.string()},
      {"  Plugin ABI", abi_text(info)},
      {"  Built with", "Kiln SDK " + info.kiln_version + ", contract " + info.contract_fingerprint},
  };
  out << "Plugin Details:\n";
  print_table(header, out);
  out << "\nParameters:\n";
  if (info.params.empty()) out << "  none\n";
  params_text(info.params, out);
  if (const auto host = host_keys(info.kind); !host.empty()) {
    out << "\nHost keys of " << config_table(info.kind) << " (read by Kiln itself, never passed to the plugin):\n";
    params_text(host, out);
  }
}

[[noreturn]] void usage_error(const std::string& what) {
  throw ConfigError("kiln plugins: " + what +
                    "; usage: `kiln plugins list [--json]`, `kiln plugins show NAME [--json]`, "
                    "`kiln plugins check FILE [--json]` or `kiln plugins test FILE [--set key=value]... [--timeout SECONDS]`");
}

std::filesystem::path resolved(const std::filesystem::path& p) {
  std::error_code ec;
  const auto r = std::filesystem::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : r;
}

/// Whether a run over `search_path` would use the plugins of a library that passed its checks:
/// "yes, ..." or "no: <why, and the fix>".
std::string found_by_a_run(const plugin::LibraryCheck& check, const std::vector<std::filesystem::path>& search_path) {
  const std::string file_name = check.file.filename().string();
  if (!plugin::is_plugin_file_name(file_name)) {
    std::string names;
    for (const auto& info : check.plugins) {
      names += (names.empty() ? "" : " or ") + plugin::plugin_file_name(info.kind, info.name);
    }
    return "no: a run reads only files named libkiln-*.so, and looks first in the one named after the plugin it "
           "asks for; name this one " + names;
  }
  const auto dir = resolved(check.file.parent_path());
  std::size_t entry = search_path.size();
  for (std::size_t i = 0; i < search_path.size() && entry == search_path.size(); ++i) {
    if (resolved(search_path[i]) == dir) entry = i;
  }
  if (entry == search_path.size()) {
    std::string searched;
    for (const auto& d : search_path) searched += " " + d.string();
    const auto user_dir = plugin::user_plugin_dir();
    return "no: " + check.file.parent_path().string() + " is not on the search path; pass --plugin-path " +
           check.file.parent_path().string() + (user_dir ? ", add it to KILN_PLUGIN_PATH or copy the file into " +
                                                               user_dir->string()
                                                         : " or add it to KILN_PLUGIN_PATH") +
           " (searched:" + searched + ")";
  }
  Registry registry(search_path);
  registry.scan();
  for (const auto& info : check.plugins) {
    for (const auto& used : registry.plugins()) {
      if (used.kind == info.kind && used.name == info.name && resolved(used.library) != resolved(check.file)) {
        return "no: " + std::string(plugin::kind_name(info.kind)) + " '" + info.name + "' from " +
               used.library.string() + ", earlier on the search path, is used instead";
      }
    }
  }
  return "yes: " + check.file.parent_path().string() + " is entry " + std::to_string(entry + 1) + " of " +
         std::to_string(search_path.size()) + " on the search path";
}

/// `check FILE`: the loader's verdict on one file, what it exports, and whether a run finds it.
int check_command(const std::filesystem::path& file, const std::vector<std::filesystem::path>& plugin_path_dirs,
                  bool json, std::ostream& out) {
  const plugin::LibraryCheck check = plugin::check_library(file);
  if (!check.failure.empty()) {
    if (!json) throw PluginError(check.failure);
    out << "{\"library\": " << io::json_quoted(check.file.string()) << ", \"loads\": false, \"failure\": "
        << io::json_quoted(check.failure) << ", \"plugins\": [], \"found\": null}\n";
    return 1;
  }
  const std::string found = found_by_a_run(check, plugin::default_search_path(plugin_path_dirs));
  if (json) {
    out << "{\"library\": " << io::json_quoted(check.file.string()) << ", \"loads\": true, \"failure\": null, "
        << "\"plugins\": [";
    for (std::size_t i = 0; i < check.plugins.size(); ++i) {
      out << (i ? ",\n  " : "\n  ");
      plugin_json(check.plugins[i], out);
    }
    out << "],\n \"found\": " << io::json_quoted(found) << "}\n";
    return 0;
  }
  const PluginInfo& first = check.plugins.front();  // read_descriptor refuses a library exporting none
  std::vector<std::vector<std::string>> rows = {
      {"Library", check.file.string()},
      {"Checks", "passed: trusted path, descriptor section, load in a child process, symbols bound at load, plugin "
                 "ABI " + abi_text(first) + ", toolchain key, contract " + first.contract_fingerprint +
                 " (the same as this kiln's)"},
      {"Built with", "Kiln SDK " + first.kiln_version}};
  for (const auto& info : check.plugins) {
    rows.push_back({"Plugin", std::string(plugin::kind_name(info.kind)) + " '" + info.name + "' " + info.version +
                                  ": select it with type = \"" + info.name + "\" in " +
                                  std::string(config_table(info.kind))});
  }
  rows.push_back({"Found by a run", found});
  print_table(rows, out);
  return 0;
}

}  // namespace

int run_plugins_command(const std::vector<std::string>& args,
                        const std::vector<std::filesystem::path>& plugin_path_dirs, std::ostream& out) {
  if (std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    out << "usage: kiln plugins list [--json]                 every plugin found, and libraries that failed to load\n"
           "       kiln plugins show NAME [--json]            a plugin's kind, version, ABI and parameters\n"
           "       kiln plugins check FILE [--json]           whether kiln loads a library, and finds it on the search path\n"
           "       kiln plugins test FILE [--set key=value]... [--timeout SECONDS]\n"
           "                                                  each plugin of a library against its contract; --set as in a\n"
           "                                                  config (--set model.hidden=[32]); --timeout: the timeout the\n"
           "                                                  communicator checks give (default 20 s)\n"
           "\nThe search path: --plugin-path DIR (repeatable), then KILN_PLUGIN_PATH, then the plugins installed\n"
           "next to kiln. docs/writing-a-plugin.md says what `test` checks.\n";
    return 0;
  }
  const std::string sub = args.empty() || args[0] == "--json" ? "list" : args[0];
  const std::size_t first_option = args.empty() || args[0] == "--json" ? 0 : 1;

  if (sub == "list") {
    bool json = false;
    for (std::size_t i = first_option; i < args.size(); ++i) {
      if (args[i] == "--json") {
        json = true;
      } else {
        usage_error("unexpected argument '" + args[i] + "' to `list`");
      }
    }
    Registry registry(plugin::default_search_path(plugin_path_dirs));
    registry.scan();
    if (json) {
      list_json(registry, out);
    } else {
      list_text(registry, out);
    }
    return 0;
  }
  // `show NAME` and `check FILE`: one word and an optional --json, in any order.
  const auto one_word = [&](const char* needs) {
    std::vector<std::string> words;
    bool json = false;
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--json") {
        json = true;
      } else {
        words.push_back(args[i]);
      }
    }
    if (words.size() != 1) usage_error("`" + sub + "` takes exactly one " + needs);
    return std::make_pair(words[0], json);
  };
  if (sub == "show") {
    const auto [name, json] = one_word("plugin name");
    Registry registry(plugin::default_search_path(plugin_path_dirs));
    registry.scan();
    const auto matches = registry.require_any_kind(name);
    if (json) {
      show_json(matches, out);
      return 0;
    }
    for (std::size_t i = 0; i < matches.size(); ++i) {
      if (i) out << '\n';
      show_text(*matches[i], out);
    }
    return 0;
  }
  if (sub == "check") {
    const auto [file, json] = one_word("library file");
    return check_command(file, plugin_path_dirs, json, out);
  }
  if (sub == "test") {
    std::vector<std::string> files, sets;
    std::optional<std::string> timeout;
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--set" && i + 1 < args.size()) {
        sets.push_back(args[++i]);
      } else if (args[i].starts_with("--set=")) {
        sets.push_back(args[i].substr(6));
      } else if (args[i] == "--timeout" && i + 1 < args.size()) {
        timeout = args[++i];
      } else if (args[i].starts_with("--timeout=")) {
        timeout = args[i].substr(10);
      } else if (args[i].starts_with("-")) {
        usage_error("unexpected option '" + args[i] + "' to `test` (it takes --set key=value and --timeout SECONDS)");
      } else {
        files.push_back(args[i]);
      }
    }
    if (files.size() != 1) usage_error("`test` takes exactly one library file");
    return run_plugins_test(files[0], sets, plugin_path_dirs, out, timeout);
  }
  usage_error("unknown subcommand '" + sub + "'");
}

}  // namespace kiln::cli
