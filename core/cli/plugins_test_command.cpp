// `kiln plugins test` (see plugins_test_command.hpp).
#include "plugins_test_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <ostream>

#include "conformance.hpp"
#include "conformance_backend.hpp"
#include "conformance_precision.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/wiring.hpp"

namespace kiln::cli {
namespace {

// The config table a run would read each kind's parameters from.
const char* table_of(std::uint32_t kind) {
  return kind == KILN_KIND_MODEL ? "model"
         : kind == KILN_KIND_COMMUNICATOR ? "comm"
         : kind == KILN_KIND_BACKEND      ? "backend"
         : kind == KILN_KIND_PRECISION    ? "precision"
                                          : "data.train";
}

bool has_checks(std::uint32_t kind) {
  return kind == KILN_KIND_MODEL || kind == KILN_KIND_DATA || kind == KILN_KIND_COMMUNICATOR ||
         kind == KILN_KIND_BACKEND || kind == KILN_KIND_PRECISION;
}

void print_lines(const std::vector<CheckLine>& lines, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& line : lines) width = std::max(width, line.name.size());
  for (const auto& line : lines) {
    out << (line.skipped ? "  -     " : line.ok ? "  ok    " : "  FAIL  ") << line.name << std::string(width - line.name.size() + 2, ' ')
        << line.detail << '\n';
  }
}

/// `--timeout SECONDS`: a plain number in [1, 3600]. Below a second the failure checks' tenth
/// (100 ms) is shorter than a loaded machine's scheduling delays; above an hour is a typo.
CommCheckTimes comm_check_times(const std::string& text, const plugin::LibraryCheck& check) {
  const bool has_comm = std::any_of(check.plugins.begin(), check.plugins.end(),
                                    [](const plugin::PluginInfo& p) { return p.kind == KILN_KIND_COMMUNICATOR; });
  if (!has_comm) {
    throw ConfigError(fmt::format("--timeout {}: only the communicator checks have timeouts, and {} exports no "
                                  "communicator; leave it out",
                                  text, check.file.string()));
  }
  double seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !(seconds >= 1 && seconds <= 3600)) {
    throw ConfigError(fmt::format("--timeout {}: give the communicators' timeout as a number of seconds from 1 to 3600 "
                                  "(default 20)",
                                  text));
  }
  return CommCheckTimes{std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000)))};
}

}  // namespace

int run_plugins_test(const std::filesystem::path& file, const std::vector<std::string>& sets,
                     const std::vector<std::filesystem::path>& plugin_path_dirs, std::ostream& out,
                     const std::optional<std::string>& timeout) {
  const plugin::LibraryCheck check = plugin::check_library(file);
  if (!check.failure.empty()) throw PluginError(check.failure);
  const CommCheckTimes times = timeout ? comm_check_times(*timeout, check) : CommCheckTimes{};

  // A config for the backend and every tested kind's table, so a --set for a table nothing reads
  // is refused like in a run. A library may export several plugins of one kind (the nccl
  // library: nccl-ring and nccl-tree); each is validated in a config of its own that names it in
  // its kind's table, with the library's first plugin of every other kind in theirs. [backend]
  // names the library's backend if it exports one, else `cpu`: the backend the other kinds run on.
  plugin::Registry registry(plugin::default_search_path(plugin_path_dirs));
  registry.index();
  std::vector<std::size_t> tested;
  for (std::size_t i = 0; i < check.plugins.size(); ++i) {
    if (has_checks(check.plugins[i].kind)) tested.push_back(i);
  }
  // Returns the cpu backend's choice (none when the library names [backend]) and the validated
  // parameters of plugin `chosen` (none for kNone) from a config naming it.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  const auto validate_naming = [&](std::size_t chosen) {
    std::string text;
    std::vector<std::size_t> named;  // the plugin in each table, one per kind
    for (const std::size_t i : tested) {
      const std::uint32_t kind = check.plugins[i].kind;
      const bool taken = std::any_of(named.begin(), named.end(), [&](std::size_t j) { return check.plugins[j].kind == kind; });
      if (taken) continue;
      const std::size_t pick = chosen != kNone && check.plugins[chosen].kind == kind ? chosen : i;
      named.push_back(pick);
      text += fmt::format("[{}]\ntype = \"{}\"\n", table_of(kind), check.plugins[pick].name);
    }
    const bool names_backend =
        std::any_of(named.begin(), named.end(), [&](std::size_t j) { return check.plugins[j].kind == KILN_KIND_BACKEND; });
    if (!names_backend) text = "[backend]\ntype = \"cpu\"\n" + text;
    config::Config cfg = config::Config::parse(text, "kiln plugins test", sets);
    std::optional<train::PluginChoice> cpu;
    if (!names_backend) cpu = train::choose(cfg, registry, KILN_KIND_BACKEND, "backend", "cpu");
    ParamMap params;
    for (const std::size_t j : named) {
      (void)cfg.plugin_type(table_of(check.plugins[j].kind));
      ParamMap validated = cfg.validate(table_of(check.plugins[j].kind), check.plugins[j].params);
      if (j == chosen) params = std::move(validated);
    }
    cfg.check_all_consumed();
    return std::make_pair(std::move(cpu), std::move(params));
  };
  std::vector<ParamMap> params(check.plugins.size());
  for (const std::size_t i : tested) params[i] = validate_naming(i).second;
  // The backend models and communicators run on, made when one of them is tested: `cpu`, or the
  // library's first backend (a library that brings its own backend tests its plugins on it).
  const std::optional<train::PluginChoice> cpu_choice = validate_naming(kNone).first;
  std::shared_ptr<Backend> shared_backend;
  const auto backend_for_checks = [&]() -> Backend& {
    if (shared_backend == nullptr) {
      PluginArgs args;
      if (cpu_choice) {
        args.params = &cpu_choice->params;
        shared_backend = registry.create_backend(*cpu_choice->info, args);
      } else {
        const auto first = std::find_if(tested.begin(), tested.end(),
                                        [&](std::size_t i) { return check.plugins[i].kind == KILN_KIND_BACKEND; });
        args.params = &params[*first];
        shared_backend = registry.create_backend(check.plugins[*first], args);
      }
    }
    return *shared_backend;
  };
  out << "library " << check.file.string() << ": passes the loader's checks\n";
  bool all_ok = true;
  for (std::size_t i = 0; i < check.plugins.size(); ++i) {
    const plugin::PluginInfo& info = check.plugins[i];
    out << '\n' << plugin::kind_name(info.kind) << " '" << info.name << "' " << info.version << '\n';
    PluginArgs args;
    args.params = &params[i];
    std::vector<CheckLine> lines;
    if (info.kind == KILN_KIND_MODEL) {
      lines = check_model([&] { return registry.create_model(info, args); }, backend_for_checks());
    } else if (info.kind == KILN_KIND_DATA) {
      lines = check_data(*registry.create_data(info, args));
    } else if (info.kind == KILN_KIND_COMMUNICATOR) {
      const CommMaker make = [&registry, &info, params = &params[i]](const RankInfo& ranks) {
        PluginArgs rank_args;
        rank_args.params = params;
        rank_args.ranks = ranks;
        return registry.create_communicator(info, rank_args);
      };
      const CommCheckReport report = check_communicator(make, backend_for_checks(), times);
      lines = report.lines;
      if (report.hung) {
        // A thread is still inside the plugin: report, then end without unloading it.
        print_lines(lines, out);
        out << "\nsome checks FAILED (a call stayed blocked in the plugin; exiting without unloading it)" << std::endl;
        std::_Exit(1);
      }
    } else if (info.kind == KILN_KIND_PRECISION) {
      lines = check_precision([&] { return registry.create_precision(info, args); }, backend_for_checks());
    } else if (info.kind == KILN_KIND_BACKEND) {
      // Made in a check of its own: a backend that cannot start here (no device) is a failed
      // line that says why, not an aborted report.
      std::shared_ptr<Backend> made;
      lines.push_back(run_check("make", [&]() -> Verdict {
        made = registry.create_backend(info, args);
        return {true, sets.empty() ? "made from its parameters' defaults" : "made from its parameters' defaults and --set"};
      }));
      if (made != nullptr) {
        const std::vector<CheckLine> more = check_backend(*made);
        lines.insert(lines.end(), more.begin(), more.end());
      }
    } else {  // a kind added to the ABI after these checks were written
      out << "  -     no checks here for " << plugin::kind_name(info.kind) << " plugins\n";
      continue;
    }
    print_lines(lines, out);
    for (const auto& line : lines) all_ok = all_ok && line.ok;
  }
  out << '\n' << (all_ok ? "all checks passed" : "some checks FAILED") << '\n';
  return all_ok ? 0 : 1;
}

}  // namespace kiln::cli
