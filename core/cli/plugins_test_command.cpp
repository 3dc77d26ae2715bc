// `kiln plugins test` (see plugins_test_command.hpp).
#include "plugins_test_command.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <ostream>

#include "conformance.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/wiring.hpp"

namespace kiln::cli {
namespace {

// The config table a run would read each kind's parameters from.
const char* table_of(std::uint32_t kind) {
  return kind == KILN_KIND_MODEL ? "model" : kind == KILN_KIND_COMMUNICATOR ? "comm" : "data.train";
}

bool has_checks(std::uint32_t kind) {
  return kind == KILN_KIND_MODEL || kind == KILN_KIND_DATA || kind == KILN_KIND_COMMUNICATOR;
}

void print_lines(const std::vector<CheckLine>& lines, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& line : lines) width = std::max(width, line.name.size());
  for (const auto& line : lines) {
    out << (line.skipped ? "  -     " : line.ok ? "  ok    " : "  FAIL  ") << line.name << std::string(width - line.name.size() + 2, ' ')
        << line.detail << '\n';
  }
}

}  // namespace

int run_plugins_test(const std::filesystem::path& file, const std::vector<std::string>& sets,
                     const std::vector<std::filesystem::path>& plugin_path_dirs, std::ostream& out) {
  const plugin::LibraryCheck check = plugin::check_library(file);
  if (!check.failure.empty()) throw PluginError(check.failure);

  // One config for the cpu backend and every tested plugin's table, so a --set for a table
  // nothing reads is refused like in a run.
  std::string text = "[backend]\ntype = \"cpu\"\n";
  for (const auto& info : check.plugins) {
    if (has_checks(info.kind)) text += fmt::format("[{}]\ntype = \"{}\"\n", table_of(info.kind), info.name);
  }
  config::Config cfg = config::Config::parse(text, "kiln plugins test", sets);
  plugin::Registry registry(plugin::default_search_path(plugin_path_dirs));
  registry.index();
  const train::PluginChoice backend_c = train::choose(cfg, registry, KILN_KIND_BACKEND, "backend", "cpu");
  std::vector<ParamMap> params;
  params.reserve(check.plugins.size());
  for (const auto& info : check.plugins) {
    const bool tested = has_checks(info.kind);
    if (tested) (void)cfg.plugin_type(table_of(info.kind));
    params.push_back(tested ? cfg.validate(table_of(info.kind), info.params) : ParamMap());
  }
  cfg.check_all_consumed();

  PluginArgs backend_args;
  backend_args.params = &backend_c.params;
  const std::shared_ptr<Backend> backend = registry.create_backend(*backend_c.info, backend_args);
  out << "library " << check.file.string() << ": passes the loader's checks\n";
  bool all_ok = true;
  for (std::size_t i = 0; i < check.plugins.size(); ++i) {
    const plugin::PluginInfo& info = check.plugins[i];
    out << '\n' << plugin::kind_name(info.kind) << " '" << info.name << "' " << info.version << '\n';
    PluginArgs args;
    args.params = &params[i];
    std::vector<CheckLine> lines;
    if (info.kind == KILN_KIND_MODEL) {
      lines = check_model([&] { return registry.create_model(info, args); }, *backend);
    } else if (info.kind == KILN_KIND_DATA) {
      lines = check_data(*registry.create_data(info, args));
    } else if (info.kind == KILN_KIND_COMMUNICATOR) {
      const CommMaker make = [&registry, &info, params = &params[i]](const RankInfo& ranks) {
        PluginArgs rank_args;
        rank_args.params = params;
        rank_args.ranks = ranks;
        return registry.create_communicator(info, rank_args);
      };
      const CommCheckReport report = check_communicator(make, *backend);
      lines = report.lines;
      if (report.hung) {
        // A thread is still inside the plugin: report, then end without unloading it.
        print_lines(lines, out);
        out << "\nsome checks FAILED (a call stayed blocked in the plugin; exiting without unloading it)" << std::endl;
        std::_Exit(1);
      }
    } else {
      out << "  -     no checks here for " << plugin::kind_name(info.kind)
          << " plugins: Kiln's own suites are tests/backend-conformance (test_backend_conformance -- NAME) and "
             "tests/precision\n";
      continue;
    }
    print_lines(lines, out);
    for (const auto& line : lines) all_ok = all_ok && line.ok;
  }
  out << '\n' << (all_ok ? "all checks passed" : "some checks FAILED") << '\n';
  return all_ok ? 0 : 1;
}

}  // namespace kiln::cli
