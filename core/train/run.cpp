// Wiring a run from its config: validation, plugins, run directory, banner, trainer.
#include "kiln/train/run.hpp"

#include <fmt/format.h>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/run_dir.hpp"
#include "kiln/log/log.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/version.hpp"

namespace kiln::train {
namespace {

/// A plugin table after validation: which plugin, and its parameters.
struct PluginChoice {
  std::string table;
  const plugin::PluginInfo* info = nullptr;
  ParamMap params;
};

PluginChoice choose(config::Config& cfg, const plugin::Registry& registry, std::uint32_t kind,
                    const std::string& table, const char* default_type) {
  const std::string type = default_type ? cfg.plugin_type(table, default_type) : cfg.plugin_type(table);
  PluginChoice c;
  c.table = table;
  c.info = &registry.require(kind, type, table);
  c.params = cfg.validate(table, c.info->params);
  return c;
}

/// Accepts a data source whose samples the model can take: same dtype and element count
/// (a model with a 1-D input takes any sample shape of that size, flattened).
void check_model_data(const InputSpec& spec, const DatasetInfo& data, const std::string& table) {
  const bool same_shape = spec.sample_shape == data.sample_shape;
  const bool flattenable = spec.sample_shape.size() == 1 && shape_numel(spec.sample_shape) == shape_numel(data.sample_shape);
  if (spec.dtype != data.sample_dtype || !(same_shape || flattenable)) {
    throw ConfigError(fmt::format("the model expects samples of {} {}, but [{}] produces {} {}", dtype_name(spec.dtype),
                                  shape_string(spec.sample_shape), table, dtype_name(data.sample_dtype),
                                  shape_string(data.sample_shape)));
  }
  if (data.num_classes > spec.num_classes) {
    throw ConfigError(fmt::format("[{}] has {} classes but the model outputs only {}; set model.num_classes",
                                  table, data.num_classes, spec.num_classes));
  }
}

data::LoaderOptions loader_options(const ParamMap& loader, const RankInfo& ranks, std::int64_t count,
                                   std::int64_t batch, const char* policy_key, data::Shuffle shuffle,
                                   std::uint64_t seed) {
  data::LoaderOptions o;
  o.shard.count = count;
  o.shard.batch = batch;
  o.shard.rank = ranks.rank;
  o.shard.world_size = ranks.world_size;
  o.shard.last_batch = data::parse_last_batch(loader.get_string(policy_key), loader.where(policy_key));
  o.shard.shuffle = shuffle;
  o.shard.seed = seed;
  o.workers = static_cast<int>(loader.get_int("workers"));
  o.prefetch = static_cast<int>(loader.get_int("prefetch"));
  if (o.workers < 1) throw ConfigError(loader.where("workers") + " must be at least 1");
  if (o.prefetch < 1) throw ConfigError(loader.where("prefetch") + " must be at least 1");
  return o;
}

/// A TOML basic string holding `text`.
std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

spdlog::level::level_enum parse_level(const std::string& s) {
  return spdlog::level::from_str(s);  // the schema's choices guarantee a valid name
}

}  // namespace

RunOutcome run_training(const TrainCommand& command) {
  const RankInfo ranks = launch::resolve_ranks(command.ranks);
  log::configure(ranks);

  // ---- 1. the whole config, validated before anything is written ----
  // --run-dir becomes an override, so config.toml records where the run really went.
  std::vector<std::string> overrides = command.overrides;
  if (!command.run_dir.empty()) overrides.push_back("run.run_dir=" + toml_string(command.run_dir));
  config::Config cfg = config::Config::load(command.config, overrides);
  const ParamMap run = cfg.validate("run", run_schema());
  const ParamMap loader = cfg.validate("loader", loader_schema());
  const ParamMap loss = cfg.validate("loss", loss_schema());
  const ParamMap logt = cfg.validate("log", log_schema());
  log::configure(ranks, parse_level(logt.get_string("level")));

  const std::string optimizer_type = cfg.plugin_type("optimizer", "adam");
  const ParamMap optimizer = cfg.validate("optimizer", optimizer_schema(optimizer_type));
  const std::string schedule_type = cfg.plugin_type("schedule", "constant");
  const ParamMap schedule = cfg.validate("schedule", schedule_schema());

  plugin::Registry registry(plugin::default_search_path(command.plugin_dirs));
  registry.scan();
  const PluginChoice backend_c = choose(cfg, registry, KILN_KIND_BACKEND, "backend", "cpu");
  const PluginChoice model_c = choose(cfg, registry, KILN_KIND_MODEL, "model", nullptr);
  const PluginChoice train_c = choose(cfg, registry, KILN_KIND_DATA, "data.train", nullptr);
  std::optional<PluginChoice> eval_c;
  if (cfg.has_table("data.eval")) eval_c = choose(cfg, registry, KILN_KIND_DATA, "data.eval", nullptr);
  const PluginChoice comm_c = choose(cfg, registry, KILN_KIND_COMMUNICATOR, "comm", "local");
  const PluginChoice precision_c = choose(cfg, registry, KILN_KIND_PRECISION, "precision", "fp32");
  cfg.check_all_consumed();

  const std::int64_t epochs = run.get_int("epochs");
  if (epochs < 1) throw ConfigError(run.where("epochs") + " must be at least 1");
  const std::int64_t batch = loader.get_int("batch");
  if (batch < 1) throw ConfigError(loader.where("batch") + " must be at least 1");
  const std::int64_t eval_batch = loader.get_int("eval_batch") > 0 ? loader.get_int("eval_batch") : batch;
  const double smoothing = loss.get_float("label_smoothing");
  if (!(smoothing >= 0 && smoothing < 1)) throw ConfigError(loss.where("label_smoothing") + " must be in [0, 1)");
  // Build the optimizer and schedule once now, only to check their values before anything is
  // written; the trainer makes the real ones when it knows the steps per epoch.
  (void)make_optimizer(optimizer_type, optimizer);
  (void)LrSchedule(schedule_type, schedule, optimizer.get_float("lr"), 1, epochs);
  const double bucket_mb = run.get_float("grad_bucket_mb");
  if (!(bucket_mb > 0)) throw ConfigError(run.where("grad_bucket_mb") + " must be > 0");

  // ---- 2. the run directory (rank 0 creates it; others use the same path) ----
  const std::string requested = run.get_string("run_dir");
  RunOutcome outcome;
  outcome.run_dir = ranks.rank == 0 ? io::prepare_run_dir(requested) : std::filesystem::path(requested);
  if (ranks.rank == 0) io::write_file_atomic(outcome.run_dir / "config.toml", cfg.resolved_toml());
  if (!outcome.run_dir.empty()) log::attach_log_dir(outcome.run_dir / "logs");
  auto log = log::get("kiln");

  // ---- 3. plugins ----
  auto args_for = [&](const PluginChoice& c) {
    PluginArgs a;
    a.params = &c.params;
    a.ranks = ranks;
    a.run_dir = outcome.run_dir.string();
    return a;
  };
  RunParts parts;
  parts.backend = registry.create_backend(*backend_c.info, args_for(backend_c));
  parts.comm = registry.create_communicator(*comm_c.info, args_for(comm_c));
  parts.precision = registry.create_precision(*precision_c.info, args_for(precision_c));
  parts.model = registry.create_model(*model_c.info, args_for(model_c));
  parts.train_data = registry.create_data(*train_c.info, args_for(train_c));
  if (eval_c) parts.eval_data = registry.create_data(*eval_c->info, args_for(*eval_c));

  const InputSpec spec = parts.model->input_spec();
  const DatasetInfo train_info = parts.train_data->describe();
  check_model_data(spec, train_info, "data.train");
  DatasetInfo eval_info;
  if (parts.eval_data) {
    eval_info = parts.eval_data->describe();
    check_model_data(spec, eval_info, "data.eval");
  }

  CommContext cc;
  cc.ranks = ranks;
  cc.backend = parts.backend.get();
  parts.comm->connect(cc);

  // ---- 4. banner ----
  const DeviceInfo dev = parts.backend->device();
  log->info("kiln {} | world {} | rank {} -> {} (local rank {}/{}; ranks from {})", kVersion, ranks.world_size,
            ranks.rank, dev.name, ranks.local_rank, ranks.local_world_size, ranks.source);
  log->info("backend   {} {} ({} threads) {}", backend_c.info->name, backend_c.info->version, dev.threads, dev.detail);
  log->info("model     {} {}: input {} {}, {} classes", model_c.info->name, model_c.info->version,
            dtype_name(spec.dtype), shape_string(spec.sample_shape), spec.num_classes);
  log->info("data      train: {}", train_info.description);
  if (parts.eval_data) log->info("data      eval: {}", eval_info.description);
  log->info("comm      {} {}: {}", comm_c.info->name, comm_c.info->version, parts.comm->describe());
  log->info("precision {} {}: params {}, compute {}", precision_c.info->name, precision_c.info->version,
            dtype_name(parts.precision->param_dtype()), dtype_name(parts.precision->compute_dtype()));
  log->info("run dir   {}", outcome.run_dir.string());

  // ---- 5. train ----
  TrainerOptions to;
  to.epochs = epochs;
  to.seed = static_cast<std::uint64_t>(run.get_int("seed"));
  to.label_smoothing = static_cast<float>(smoothing);
  to.bucket_bytes = static_cast<std::int64_t>(bucket_mb * 1e6);
  to.train_loader = loader_options(loader, ranks, train_info.count, batch, "last_batch",
                                   loader.get_bool("shuffle") ? data::Shuffle::yes : data::Shuffle::no, to.seed);
  if (parts.eval_data) {
    to.eval_loader = loader_options(loader, ranks, eval_info.count, eval_batch, "eval_last_batch", data::Shuffle::no,
                                    to.seed);
  }
  to.optimizer_type = optimizer_type;
  to.optimizer_table = optimizer;
  to.schedule_type = schedule_type;
  to.schedule_table = schedule;
  to.progress = io::parse_progress_mode(logt.get_string("progress"), logt.where("progress"));

  std::unique_ptr<io::MetricsWriter> metrics;
  if (ranks.rank == 0) metrics = std::make_unique<io::MetricsWriter>(outcome.run_dir / "metrics.jsonl");
  Trainer trainer(std::move(parts), std::move(to), ranks, metrics.get());
  outcome.result = trainer.run();
  log->info("done: {} steps; final test accuracy {:.4f}; outputs in {}", outcome.result.steps,
            outcome.result.final_eval_accuracy, outcome.run_dir.string());
  log::flush();
  return outcome;
}

}  // namespace kiln::train
