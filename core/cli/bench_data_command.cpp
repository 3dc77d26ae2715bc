// `kiln bench-data` (bench_data_command.hpp). The config is validated by the rules `kiln train`
// uses (every table, every plugin's parameters), so a config that benchmarks here trains there;
// then only the backend (it provides the loader's staging memory) and the training data source
// are created, and a DataLoader with the config's options is drained.
#include "bench_data_command.hpp"

#include <boost/program_options.hpp>

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <optional>

#include "kiln/config/config.hpp"
#include "kiln/data/data_loader.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/metrics_writer.hpp"
#include "kiln/plugin/guarded.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/sdk_internal/log_setup.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/config_plugins.hpp"
#include "kiln/train/wiring.hpp"

namespace kiln::cli {
namespace po = boost::program_options;
namespace {

/// CPU time of every thread of this process, in seconds.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Measured {
  std::int64_t batches = 0;
  std::int64_t samples = 0;
  double wall_s = 0;
  double cpu_s = 0;
  double worker_busy_s = 0;
};

}  // namespace

int run_bench_data_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description opts("kiln bench-data options");
  std::string config;
  std::vector<std::string> sets, plugin_paths;
  std::int64_t batches = 0, warmup = 1;
  opts.add_options()
      ("help,h", "show this help")
      ("config,c", po::value(&config)->required(), "training config whose [data.train] and [loader] to run")
      ("set,s", po::value(&sets)->composing(), "override a config key (repeatable), e.g. --set loader.workers=2")
      ("plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directory, searched first (repeatable)")
      ("batches,n", po::value(&batches), "batches to time (default: one epoch); epochs repeat as needed")
      ("warmup,w", po::value(&warmup), "batches drawn before timing starts (default 1: the workers start up)")
      ("json", "print one JSON object instead of the table");
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln bench-data --config FILE [--set key=value]... [-n BATCHES] [-w WARMUP] [--json]\n\n"
        << opts << "\n";
    return 0;
  }
  po::notify(vm);
  if (vm.count("batches") && batches < 1) throw po::error("--batches must be at least 1");
  if (warmup < 0) throw po::error("--warmup must be >= 0");

  RankInfo ranks;  // one rank: the pipeline of one process
  ranks.source = "kiln bench-data";
  log::configure(ranks, log::Level::warn);

  // ---- the whole config, by `kiln train`'s rules (run.cpp step 1) ----
  config::Config cfg = config::Config::load(config, sets);
  const train::CoreTables core = train::validate_core_tables(cfg);
  const ParamMap& run = core.run;
  const ParamMap& loader = core.loader;

  std::vector<std::filesystem::path> dirs(plugin_paths.begin(), plugin_paths.end());
  plugin::Registry registry(plugin::default_search_path(dirs));
  registry.scan();
  // Every table validated as a run validates it, though only the backend and the data are used.
  const train::ConfigPlugins chosen = train::choose_config_plugins(cfg, registry);
  const train::PluginChoice& backend_c = chosen.backend;
  const train::PluginChoice& data_c = chosen.train;

  const std::int64_t batch = loader.get_int("batch");
  if (batch < 1) throw ConfigError(loader.where("batch") + " must be at least 1");
  const auto seed = static_cast<std::uint64_t>(run.get_int("seed"));

  // ---- the backend (staging memory) and the data source; nothing else ----
  auto args_for = [&](const train::PluginChoice& c) {
    PluginArgs a;
    a.params = &c.params;
    a.ranks = ranks;
    return a;
  };
  std::shared_ptr<Backend> backend = registry.create_backend(*backend_c.info, args_for(backend_c));
  std::shared_ptr<DataSource> source =
      plugin::guarded(registry.create_data(*data_c.info, args_for(data_c)), plugin::origin_of(*data_c.info));
  const DatasetInfo info = source->describe();
  train::check_batch_bytes(loader, "batch", batch, info, "data.train");
  const data::LoaderOptions lo =
      train::loader_options(loader, ranks, info.count, batch, "last_batch",
                            loader.get_bool("shuffle") ? data::Shuffle::yes : data::Shuffle::no, seed);
  data::DataLoader pipeline(source, backend.get(), lo);
  const std::int64_t per_epoch = pipeline.steps_per_epoch();
  const std::int64_t timed = vm.count("batches") ? batches : per_epoch;

  // ---- drain it: `warmup` batches untimed, then `timed` batches ----
  std::int64_t epoch = 0;
  pipeline.start_epoch(epoch);
  auto next = [&]() -> data::Batch {
    for (;;) {
      if (auto b = pipeline.next()) return *b;
      pipeline.start_epoch(++epoch);
    }
  };
  for (std::int64_t i = 0; i < warmup; ++i) (void)next();
  Measured m;
  const auto busy_before = pipeline.stats().busy_seconds;
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (; m.batches < timed; ++m.batches) m.samples += next().rows;
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.cpu_s = process_cpu_seconds() - cpu0;
  m.worker_busy_s = pipeline.stats().busy_seconds - busy_before;

  const double per_s = m.wall_s > 0 ? static_cast<double>(m.samples) / m.wall_s : 0;
  const double per_cpu_s = m.cpu_s > 0 ? static_cast<double>(m.samples) / m.cpu_s : 0;
  if (vm.count("json")) {
    io::MetricsRecord rec;
    rec.add("source", std::string(data_c.info->name))
        .add("description", info.description)
        .add("batch", batch)
        .add("workers", static_cast<std::int64_t>(lo.workers))
        .add("prefetch", static_cast<std::int64_t>(lo.prefetch))
        .add("warmup_batches", warmup)
        .add("batches", m.batches)
        .add("samples", m.samples)
        .add("wall_s", m.wall_s)
        .add("cpu_s", m.cpu_s)
        .add("worker_busy_s", m.worker_busy_s)
        .add("samples_per_s", per_s)
        .add("samples_per_cpu_s", per_cpu_s);
    out << rec.to_json() << "\n";
  } else {
    out << fmt::format("data.train {}: {}\n", data_c.info->name, info.description)
        << fmt::format("batch {}, workers {}, prefetch {}; {} batches after {} warm-up\n", batch, lo.workers,
                       lo.prefetch, m.batches, warmup)
        << fmt::format("{} samples in {:.3f} s wall, {:.3f} s CPU (workers busy {:.3f} s)\n", m.samples, m.wall_s,
                       m.cpu_s, m.worker_busy_s)
        << fmt::format("{:.1f} samples/s   {:.1f} samples per CPU-second\n", per_s, per_cpu_s);
  }
  return 0;
}

}  // namespace kiln::cli
