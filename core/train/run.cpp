// Wiring a run from its config: validation, plugins, checks, rendezvous, run directory, banner,
// trainer (run.hpp gives the order and why the run directory comes so late).
//
// Multi-rank decisions made here: the rendezvous store comes from dist.rendezvous, else
// KILN_RENDEZVOUS (what `kiln train --nproc` sets), else what the launcher implies (torchrun's
// MASTER_ADDR/PORT, Open MPI), and is required only for more than one rank;
// every rank writes into one run directory that must be named explicitly, because ranks started
// by mpirun/srun cannot agree on a timestamped default.
#include "kiln/train/run.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <optional>

#include "kiln/config/config.hpp"
#include "kiln/crash/crash_context.hpp"
#include "kiln/dist/launcher_rendezvous.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/dist/wait_reporting_store.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/run_dir.hpp"
#include "kiln/io/run_dir_claim.hpp"
#include "kiln/io/run_dir_rollback.hpp"
#include "kiln/io/run_status.hpp"
#include "kiln/io/stop_signal_deferral.hpp"
#include "kiln/sdk_internal/log_setup.hpp"
#include "kiln/plugin/guarded.hpp"
#include "kiln/plugin/plugin_call.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/profile/train_profile.hpp"
#include "kiln/sdk/checked_size.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/class_names.hpp"
#include "kiln/train/config_plugins.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/collective_purpose.hpp"
#include "kiln/train/collective_recorder.hpp"
#include "kiln/train/dry_run.hpp"
#include "kiln/train/fingerprint_communicator.hpp"
#include "kiln/train/record_on_signal.hpp"
#include "kiln/train/stall_warning.hpp"
#include "kiln/train/top_k_counter.hpp"
#include "kiln/train/trainer.hpp"
#include "kiln/train/freeze.hpp"
#include "kiln/train/keys_without_effect.hpp"
#include "kiln/train/model_table.hpp"
#include "kiln/train/sync_batch_norm.hpp"
#include "kiln/train/run_identity.hpp"
#include "kiln/train/run_length_warnings.hpp"
#include "kiln/train/run_facts.hpp"
#include "kiln/train/training_features.hpp"
#include "kiln/train/wiring.hpp"
#include "kiln/version.hpp"

namespace kiln::train {
namespace {

/// A TOML basic string holding `text`.
std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      // TOML basic strings may not hold control characters raw (a newline in --run-dir would
      // end the string); \uXXXX is valid for all of them.
      out += fmt::format("\\u{:04X}", byte);
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// The rendezvous spec for this rank: dist.rendezvous, else KILN_RENDEZVOUS, else the launcher's
/// (torchrun's MASTER_ADDR/PORT, Open MPI: launcher_rendezvous.hpp), else none (only valid for a
/// world of one). Returns {spec, where it came from}.
std::pair<std::string, std::string> rendezvous_spec(const ParamMap& dist, const RankInfo& ranks) {
  if (const std::string& key = dist.get_string("rendezvous"); !key.empty()) return {key, dist.where("rendezvous")};
  if (auto env = launch::process_env()("KILN_RENDEZVOUS"); env && !env->empty()) {
    return {*env, "environment variable KILN_RENDEZVOUS"};
  }
  if (auto implied = dist::launcher_rendezvous(ranks)) return {implied->spec, implied->from};
  if (ranks.world_size > 1) {
    throw ConfigError(fmt::format(
        "rank {} of {} (ranks from {}) has no rendezvous store to meet the other ranks through: set "
        "dist.rendezvous = \"tcp://<rank 0's host>:<port>\" or \"file:<dir>\" with a directory every rank can "
        "see (or export KILN_RENDEZVOUS=...), or start the ranks with `kiln train --nproc N`",
        ranks.rank, ranks.world_size, ranks.source));
  }
  return {"", "none (one rank)"};
}

std::chrono::milliseconds collective_timeout(const ParamMap& dist) {
  const double s = dist.get_float("timeout_s");
  // A week bounds it: a timeout is there to turn a hang into an error, never to be infinite.
  if (!(s > 0 && s <= 604800)) {
    throw ConfigError(fmt::format("{} = {} must be > 0 and at most 604800 (one week)", dist.where("timeout_s"), s));
  }
  return std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(s * 1000)));
}

/// Writes the master values of every parameter as raw f32, in parameter order (--dump-params).
void dump_parameters(const std::filesystem::path& file, Backend& backend, const Model& model) {
  backend.synchronize();
  std::string bytes;
  for (const Parameter& p : model.parameters()) {
    if (p.value.dtype() != DType::f32) {
      throw IoError(fmt::format("--dump-params writes f32, but parameter {} is {}", p.name, dtype_name(p.value.dtype())));
    }
    Tensor host = host_tensor(p.value.shape(), DType::f32);
    backend.copy(p.value, host);
    bytes.append(static_cast<const char*>(host.data()), host.bytes());
  }
  io::write_file_atomic(file, bytes);
}

/// Refuses to resume a checkpoint written by a different run (run_identity.hpp gives the rule),
/// unless the command says the difference is intended.
void check_same_run(const TrainCommand& command, const std::filesystem::path& checkpoint, const TrainerState& saved,
                    const RunIdentity& current, const ClassNames& train_classes) {
  auto log = log::get("kiln");
  // The weights' outputs mean the checkpoint's classes: a train split that numbers them otherwise
  // (an ImageFolder with a class directory added) would teach class 7 as class 8.
  if (const auto conflict = class_names_conflict(saved.class_names, "the checkpoint", train_classes, "[data.train]")) {
    if (!command.resume_ignore_config) {
      throw ConfigError(fmt::format("--resume {}: the training data's classes differ from the "
                                    "checkpoint's: {}; resume with the data it was trained on, or pass "
                                    "--resume-ignore-config if the change is intended",
                                    checkpoint.string(), *conflict));
    }
    log->warn("--resume {}: the training data's classes differ from the checkpoint's ({}); resuming anyway as "
              "--resume-ignore-config asks",
              checkpoint.string(), *conflict);
  }
  if (saved.run.empty()) {
    log->warn("--resume {}: the checkpoint records no run identity (written by an older Kiln); cannot check that it "
              "is this run's",
              checkpoint.string());
    return;
  }
  const std::vector<std::string> diffs = identity_differences(saved.run, current);
  if (diffs.empty()) return;
  const std::string list = fmt::format("{}", fmt::join(diffs, "; "));
  const auto freeze_of = [](const RunIdentity& id) {
    const auto it = id.find("model.freeze");
    return it == id.end() ? std::string() : it->second;
  };
  if (command.resume_ignore_config && freeze_of(saved.run) != freeze_of(current)) {
    // The optimizer state in the checkpoint covers exactly the parameters that trained.
    throw ConfigError(fmt::format("--resume {}: model.freeze differs from the checkpoint's ({}), and "
                                  "--resume-ignore-config cannot change it: the checkpoint holds optimizer state "
                                  "only for the parameters it trained. To train other parameters from here, start "
                                  "a new run with [model] init = \"{}\"",
                                  checkpoint.string(), list, (checkpoint / "model.safetensors").string()));
  }
  if (command.resume_ignore_config && saved.epoch_steps_done > 0) {
    // A mid-epoch position counts batches of the old shape: with another batch, world size or
    // sample count it names other samples (some trained twice, some never), and past the new
    // epoch's end it read as a damaged checkpoint.
    for (const char* key : {"loader.batch", "world_size", "data.train.count", "loader.accumulate_steps"}) {
      const auto was = saved.run.find(key), now = current.find(key);
      if ((was == saved.run.end()) != (now == current.end()) || (was != saved.run.end() && was->second != now->second)) {
        throw ConfigError(fmt::format(
            "--resume {}: the checkpoint was written {} steps into epoch {}, and {} differs from it ({}); "
            "--resume-ignore-config cannot carry a position within an epoch to another shape of epoch: resume from "
            "the checkpoint of an epoch's end, or with the checkpoint's {}",
            checkpoint.string(), saved.epoch_steps_done, saved.epochs_done + 1, key, list, key));
      }
    }
  }
  if (command.resume_ignore_config) {
    log->warn("--resume {}: resuming a different run as --resume-ignore-config asks: {}", checkpoint.string(), list);
    return;
  }
  throw ConfigError(fmt::format("--resume {}: the checkpoint is from a different run: {}; resume with the config it "
                                "was written with, or pass --resume-ignore-config if the change is intended",
                                checkpoint.string(), list));
}

}  // namespace

std::string effective_resume(const std::string& resume, const std::string& run_dir) {
  if (resume != "if-any") return resume;
  if (run_dir.empty()) {
    throw ConfigError("--resume if-any continues the run in a named directory when it has a checkpoint: pass "
                      "--run-dir DIR (or set run.run_dir); a runs/<timestamp> default is new every time");
  }
  return latest_checkpoint(std::filesystem::path(run_dir) / "checkpoints") ? "auto" : "";
}

RunOutcome run_training(const TrainCommand& command) {
  const RankInfo ranks = launch::resolve_ranks(command.ranks);
  log::configure(ranks);
  crash::set_rank(ranks.rank, ranks.world_size);
  crash::set_phase("starting (config, plugins, connecting the ranks)");

  // ---- 1. the whole config, validated before anything is written ----
  // --run-dir becomes an override, so config.toml records where the run really went.
  std::vector<std::string> overrides = command.overrides;
  if (!command.run_dir.empty()) overrides.push_back("run.run_dir=" + toml_string(command.run_dir));
  config::Config cfg = config::Config::load(command.config, overrides);
  const CoreTables core = validate_core_tables(cfg);
  const ParamMap& run = core.run;
  const ParamMap& loader = core.loader;
  const ParamMap& loss = core.loss;
  const ParamMap& logt = core.log;
  const ParamMap& dist = core.dist;
  const ParamMap& checkpoint = core.checkpoint;
  const ParamMap& early_stop = core.early_stop;
  log::configure(ranks, log::parse_level(logt.get_string("level")), logt.get_bool("all_ranks"));
  const std::string& optimizer_type = core.optimizer_type;
  const ParamMap& optimizer = core.optimizer;
  const std::string& schedule_type = core.schedule_type;
  const ParamMap& schedule = core.schedule;

  plugin::Registry registry(plugin::default_search_path(command.plugin_dirs));
  registry.index();  // loads only the plugins this run names (registry.hpp)
  const ConfigPlugins chosen = choose_config_plugins(cfg, registry);
  const PluginChoice& backend_c = chosen.backend;
  const ModelTable& model_t = chosen.model;  // the plugin's keys and the host's (init)
  const PluginChoice& model_c = model_t.plugin;
  const std::optional<InitRequest> init_req = init_request(model_t.host);
  const PluginChoice& train_c = chosen.train;
  const std::optional<PluginChoice>& eval_c = chosen.eval;
  const PluginChoice& comm_c = chosen.comm;
  const PluginChoice& precision_c = chosen.precision;

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
  (void)LrSchedule(schedule_type, schedule, optimizer.get_float("lr"), 1, epochs,
                   plateau_options(schedule_type, schedule, eval_c.has_value()));
  if (!eval_c) {
    refuse_keys_without_effect(run, run_schema(), {"eval_every_epochs"},
                               "this run evaluates nothing (it has no [data.eval] table); add one or remove the key");
  }
  const double bucket_mb = run.get_float("grad_bucket_mb");
  if (!(bucket_mb > 0)) throw ConfigError(run.where("grad_bucket_mb") + " must be > 0");
  const std::chrono::milliseconds timeout = collective_timeout(dist);
  // dist.warn_after_s: when a waiting rank warns, at the rendezvous and in a collective (0 = never).
  const std::chrono::milliseconds warn_after(std::llround(dist.get_float("warn_after_s") * 1000));
  const auto [rendezvous, rendezvous_from] = rendezvous_spec(dist, ranks);
  const std::string requested = run.get_string("run_dir");
  if (ranks.world_size > 1 && requested.empty()) {
    throw ConfigError(fmt::format("with {} ranks every rank writes into one run directory, so it must be named: "
                                  "pass --run-dir DIR (on a path every rank sees) or set run.run_dir "
                                  "(`kiln train --nproc N` does this for you)",
                                  ranks.world_size));
  }

  const std::int64_t checkpoint_every = checkpoint.get_int("every_epochs");
  const std::int64_t checkpoint_keep = checkpoint.get_int("keep");
  if (checkpoint_every < 0) throw ConfigError(checkpoint.where("every_epochs") + " must be >= 0");
  if (checkpoint_keep < 1) throw ConfigError(checkpoint.where("keep") + " must be at least 1");
  // --resume if-any: `auto` where the run directory holds a complete checkpoint, else a fresh
  // run in it, so that one command both starts a job and continues it after a restart (torchrun
  // --max-restarts, a Slurm requeue). Every rank looks at the same directory before any of them
  // writes to it; the ranks' agreement check compares what each chose.
  const std::string resume = effective_resume(command.resume, requested);
  const io::RunDirMode dir_mode = resume.empty() ? io::RunDirMode::fresh : io::RunDirMode::resume;
  std::filesystem::path resume_from;
  TrainerState saved;  // what the checkpoint to resume says, verified (checksums, metadata)
  if (!resume.empty() && resume != "auto") {
    resume_from = resume;
    if (!std::filesystem::exists(resume_from / "model.safetensors")) {
      throw IoError(fmt::format("--resume {}: not a checkpoint directory (no model.safetensors)", resume));
    }
    // An explicitly named checkpoint that is damaged stays an error: the user chose it.
    saved = inspect_checkpoint(resume_from);
  }

  // ---- 2. where the run will go: claimed by rank 0 (run_dir_claim.hpp) ----
  // Made and locked now, before the plugins see its path, so that two starts never share it (a
  // sweep started in parallel, a second --resume while the first runs). A failed start removes
  // what it made (run_dir_rollback.hpp); the rollback is taken under the lock, so it never
  // counts another run's files as this start's. SIGTERM/SIGINT wait from step 5 until the start
  // is committed or rolled back (declared first, so it ends after the rollback): under --nproc a
  // peer's failure makes the supervisor stop rank 0 at once.
  RunOutcome outcome;
  std::optional<io::StopSignalDeferral> stop_signals_held;
  std::optional<io::RunDirClaim> claim;  // released after the rollback below, which runs under it
  std::optional<io::RunDirRollback> rollback;
  if (ranks.rank == 0) {
    claim.emplace(io::RunDirClaim::take(requested, dir_mode));
    outcome.run_dir = claim->dir();
    rollback.emplace(outcome.run_dir, claim->created());
    if (!claim->unlocked_reason().empty()) {
      log::get("kiln")->warn("run directory {} cannot be locked ({}): another kiln train started in it would not be "
                             "refused",
                             outcome.run_dir.string(), claim->unlocked_reason());
    }
  } else {
    outcome.run_dir = requested;
  }
  if (resume == "auto") {
    // The newest checkpoint may be the one the crash damaged: fall back to the newest intact one
    // (latest_intact_checkpoint warns about each one it skips, naming it and why).
    auto latest = latest_intact_checkpoint(outcome.run_dir / "checkpoints");
    if (!latest) {
      throw IoError(fmt::format("--resume auto: no complete, intact checkpoint in {}; start a fresh run instead",
                                (outcome.run_dir / "checkpoints").string()));
    }
    resume_from = latest->dir;
    saved = std::move(latest->state);
  }

  // Fine-tuning weights: read and verified by rank 0, the only rank that loads them
  // (init_weights.hpp); a resumed run takes its weights from the checkpoint instead.
  std::shared_ptr<const InitWeights> init;
  if (init_req && resume_from.empty() && ranks.rank == 0) init = read_init_weights(*init_req);

  // ---- 3. plugins, and every check between them ----
  // Each object is wrapped so that whatever its methods throw names the plugin, its library and
  // the method (kiln/plugin/guarded.hpp). Factories run before anything is written into the run
  // directory (PluginArgs::run_dir documents it): a rejected parameter leaves nothing behind.
  auto args_for = [&](const PluginChoice& c) {
    PluginArgs a;
    a.params = &c.params;
    a.ranks = ranks;
    a.run_dir = outcome.run_dir.string();
    return a;
  };
  std::unique_ptr<Store> store;  // declared before the parts: it must outlive the communicator
  // What the ranks meet through: `store`, saying every dist.warn_after_s which ranks it still
  // waits for (wait_reporting_store.hpp).
  std::unique_ptr<Store> meeting;
  // ... and leaving nothing in a file: directory when the start fails (stores.hpp).
  std::unique_ptr<dist::CleanOnFailureStore> start_store;
  RunParts parts;
  parts.backend = registry.create_backend(*backend_c.info, args_for(backend_c));
  parts.comm = plugin::guarded(registry.create_communicator(*comm_c.info, args_for(comm_c)),
                               plugin::origin_of(*comm_c.info));
  if (dist.get_bool("fingerprint")) parts.comm = std::make_shared<FingerprintCommunicator>(parts.comm);
  // Outermost, so it records what the core asked for (not the fingerprints' own all_gathers).
  std::shared_ptr<CollectiveRecorder> recorder;
  if (ranks.world_size > 1 && dist.get_int("recent_collectives") > 0) {
    recorder = std::make_shared<CollectiveRecorder>(static_cast<std::size_t>(dist.get_int("recent_collectives")));
    parts.comm = std::make_shared<RecordingCommunicator>(parts.comm, recorder);
  }
  parts.precision = plugin::guarded(registry.create_precision(*precision_c.info, args_for(precision_c)),
                                    plugin::origin_of(*precision_c.info));
  parts.model = plugin::guarded(registry.create_model(*model_c.info, args_for(model_c)), plugin::origin_of(*model_c.info));
  parts.train_data = plugin::guarded(registry.create_data(*train_c.info, args_for(train_c)),
                                     plugin::origin_of(*train_c.info));
  if (eval_c) {
    parts.eval_data = plugin::guarded(registry.create_data(*eval_c->info, args_for(*eval_c)),
                                      plugin::origin_of(*eval_c->info));
  }
  // The backend is not wrapped (its ops are the hot path; guarded.hpp says why): the calls the
  // core makes on it are located here, at the boundary of the code that makes them.
  const plugin::PluginOrigin backend_origin = plugin::origin_of(*backend_c.info);
  auto backend_call = [&](std::string_view method, auto&& call) -> decltype(auto) {
    try {
      return call();
    } catch (...) {
      plugin::rethrow_from_plugin_or_core(backend_origin, method);
    }
  };

  const InputSpec spec = parts.model->input_spec();
  const DatasetInfo train_info = parts.train_data->describe();
  check_model_data(spec, train_info, "data.train", parts.train_data->name());
  require_labels(train_info, "data.train", parts.train_data->name(), "kiln train");
  DatasetInfo eval_info;
  if (parts.eval_data) {
    eval_info = parts.eval_data->describe();
    check_model_data(spec, eval_info, "data.eval", parts.eval_data->name());
    require_labels(eval_info, "data.eval", parts.eval_data->name(), "kiln train");
    check_same_classes(train_info, eval_info);
  }

  check_batch_bytes(loader, "batch", batch, train_info, "data.train");
  if (parts.eval_data) {
    check_batch_bytes(loader, loader.get_int("eval_batch") > 0 ? "eval_batch" : "batch", eval_batch, eval_info,
                      "data.eval");
  }

  const DeviceInfo dev = backend_call("device()", [&] { return parts.backend->device(); });
  if (!parts.comm->accepts(dev.memory)) {
    throw ConfigError(fmt::format(
        "communicator '{}' ([comm] type) cannot reduce tensors in {} memory, which is where backend '{}' keeps "
        "parameters and gradients; choose a communicator for that memory (gloo or local for host memory, "
        "nccl-ring or nccl-tree for CUDA device memory)",
        comm_c.info->name, dev.memory == MemoryKind::device ? "device" : "host", backend_c.info->name));
  }
  // What this run is (run_identity.hpp), recorded in its checkpoints and compared with the one
  // it resumes, before the run directory is touched.
  const std::optional<std::string> sync_bn = sync_bn_option(model_t.host, loader);
  RunIdentity identity;
  add_params(identity, "model", model_c.params);
  if (sync_bn) identity["model.sync_bn"] = "true";  // changes the math; absent when off (older checkpoints)
  const std::optional<FreezeRequest> freeze = freeze_request(model_t.host);
  if (freeze) identity["model.freeze"] = fmt::format("{}", fmt::join(freeze->patterns, ", "));  // so does this
  if (freeze && freeze->batch_norm == Mode::eval) identity["model.frozen_bn"] = "eval";  // and this (absent: train)
  identity["model.type"] = model_c.info->name;
  identity["seed"] = std::to_string(run.get_int("seed"));
  identity["loader.batch"] = std::to_string(batch);
  identity["world_size"] = std::to_string(ranks.world_size);
  identity["data.train.count"] = std::to_string(train_info.count);
  if (parts.eval_data) identity["data.eval.count"] = std::to_string(eval_info.count);
  identity["precision.type"] = precision_c.info->name;
  add_feature_identity(loader, identity);
  if (!resume_from.empty()) check_same_run(command, resume_from, saved, identity, train_info.class_names);

  // The trainer makes these checks again when it builds; made here too, they fail before the
  // run directory exists: a precision the backend cannot run, a batch larger than the data.
  parts.precision->check_backend(*parts.backend);
  TrainerOptions to;
  to.epochs = epochs;
  to.seed = static_cast<std::uint64_t>(run.get_int("seed"));
  to.label_smoothing = static_cast<float>(smoothing);
  to.stop_on_nonfinite_loss = run.get_bool("stop_on_nonfinite_loss");
  to.run_identity = identity;
  // A resumed run whose data names no classes keeps the checkpoint's names in its own checkpoints.
  to.class_names = train_info.class_names.empty() ? saved.class_names : train_info.class_names;
  to.loss_check_every = run.get_int("loss_check_every");
  to.check_sharding = command.check_sharding;
  to.bucket_bytes = static_cast<std::int64_t>(bucket_mb * 1e6);
  to.train_loader = loader_options(loader, ranks, train_info.count, batch, "last_batch",
                                   loader.get_bool("shuffle") ? data::Shuffle::yes : data::Shuffle::no, to.seed);
  (void)data::Sharder(to.train_loader.shard);
  if (parts.eval_data) {
    to.eval_loader = loader_options(loader, ranks, eval_info.count, eval_batch, "eval_last_batch", data::Shuffle::no,
                                    to.seed);
    (void)data::Sharder(to.eval_loader.shard);
  }
  to.optimizer_type = optimizer_type;
  to.optimizer_table = optimizer;
  to.schedule_type = schedule_type;
  to.schedule_table = schedule;
  to.progress = io::parse_progress_mode(logt.get_string("progress"), logt.where("progress"));
  to.progress_every_s = logt.get_float("progress_every_s");
  to.metrics_every_steps = logt.get_int("every_steps");
  to.histograms_every_epochs = logt.get_int("histograms_every_epochs");
  to.eval_every_epochs = run.get_int("eval_every_epochs");
  to.checkpoint_dir = outcome.run_dir / "checkpoints";
  to.checkpoint_every = checkpoint_every;
  to.checkpoint_keep = checkpoint_keep;
  to.resume_from = resume_from;
  read_training_features(
      {&optimizer, &loader, &checkpoint, &early_stop, &schedule, &core.ema, schedule_type, eval_c.has_value()}, to);
  const bool dry_run = command.dry_run_steps > 0;
  if (dry_run) {  // a few steps, nothing kept: one checkpoint at most, written aside (dry_run.hpp)
    to.dry_run_steps = command.dry_run_steps;
    to.dry_run_checkpoint = to.checkpoint_every > 0 || to.checkpoint_every_steps > 0 || to.keep_best.has_value();
    to.checkpoint_every = 0;
    to.checkpoint_every_steps = 0;
    to.keep_best.reset();
  }
  if (eval_c) check_watched_top_k(*parts.backend, spec.num_classes, watched_metrics(to));
  // Said once every setting has passed its checks, so a refused config gets its error alone.
  for (const std::string& w : run_length_warnings(core, epochs)) log::get("train")->warn("{}", w);
  to.load_init = init_req && resume_from.empty();
  to.sync_bn = sync_bn;
  to.freeze = freeze;
  to.init = init;
  std::shared_ptr<profile::ProfilingBackend> profiler;  // --profile: every op of the steps timed
  if (command.profile) profiler = profile::attach(parts.backend, to, command.profile_warmup);

  // ---- 4. rendezvous, the ranks' agreement (rank_agreement.hpp), connect ----
  if (!rendezvous.empty()) {
    const dist::WaitReport report{warn_after, [](const std::string& text) { log::get("dist")->warn("{}", text); }};
    store = dist::make_store(rendezvous, ranks, timeout, report);
    meeting = std::make_unique<dist::WaitReportingStore>(*store, report, ranks.rank);
    start_store = std::make_unique<dist::CleanOnFailureStore>(*meeting, *store, ranks.rank == 0);
  }
  Agreement agreement;  // the ranks' agreement check, for the banner
  double agreement_ms = 0;
  if (ranks.world_size > 1) {
    RunFactsInput facts{&core, {&backend_c, &model_c, &train_c, &comm_c, &precision_c}, &model_t.host, {}, to.seed};
    facts.data.push_back({"data.train", parts.train_data.get(), train_info});
    if (eval_c) {
      facts.plugins.push_back(&*eval_c);
      facts.data.push_back({"data.eval", parts.eval_data.get(), eval_info});
    }
    facts.command["--check-sharding"] = command.check_sharding ? "on" : "off";
    // A dry run stops after a few steps and undoes its start: one rank training on alone would
    // fail at its next collective with sizes that name nothing.
    facts.command["--dry-run"] = dry_run ? fmt::format("{} steps", command.dry_run_steps) : "off";
    facts.command["--resume"] = resume_from.empty() ? "none"
                                                    : fmt::format("{} (step {})", resume_from.string(), saved.global_step);
    const auto agree_start = std::chrono::steady_clock::now();
    agreement = check_ranks_agree(*start_store, ranks, run_facts(facts), timeout, dist::describe_store(*store));
    agreement_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - agree_start).count();
  }
  CommContext cc;
  cc.ranks = ranks;
  cc.store = start_store.get();
  cc.backend = parts.backend.get();
  cc.timeout = timeout;
  parts.comm->connect(cc);

  // ---- 5. the run directory's contents (rank 0 writes them; others use the same path), config, logs ----
  // What still can fail from here until training starts needs the directory (the metrics file,
  // the trainer that writes it); a failure removes what this start wrote (run_dir_rollback.hpp).
  if (ranks.rank == 0) {
    stop_signals_held.emplace();
    io::create_run_dir(outcome.run_dir);
    // A resumed run keeps the original config.toml and records its own next to it.
    std::filesystem::path config_file = outcome.run_dir / "config.toml";
    for (int i = 1; std::filesystem::exists(config_file); ++i) {
      config_file = outcome.run_dir / fmt::format("config.resume-{}.toml", i);
    }
    io::write_file_atomic(config_file, cfg.resolved_toml());
  }
  // The other ranks write into the directory only between these two barriers: after rank 0 has
  // recorded what it held and created it (else a logs/ they made would count as old and outlive
  // a failed start), and before rank 0 can fail and roll back (else they would make it again).
  {
    const CollectivePurpose purpose("start: the run directory and the logs");
    if (ranks.world_size > 1) parts.comm->barrier();
    // A dry run's log lines go to the console only: a resumed run's logs/ are the run's own.
    if (!outcome.run_dir.empty() && !dry_run) log::attach_log_dir(outcome.run_dir / "logs");
    if (ranks.world_size > 1) parts.comm->barrier();
  }
  // Every rank has connected and passed the barriers: nobody reads the store again, and a `file:`
  // directory is emptied for the next run (stores.hpp).
  if (start_store) start_store->dismiss();
  if (ranks.rank == 0 && store) dist::forget_rendezvous_keys(*store);
  auto log = log::get("kiln");
  for (const std::string& note : cfg.notes()) log->info("{}", note);

  // ---- 6. banner ----
  log->info("kiln {} | world {} | rank {} -> {} (local rank {}/{}; ranks from {})", kVersion, ranks.world_size,
            ranks.rank, dev.name, ranks.local_rank, ranks.local_world_size, ranks.source);
  log->info("backend   {} {} ({} threads) {}", backend_c.info->name, backend_c.info->version, dev.threads, dev.detail);
  log->info("model     {} {}: input {} {}, {} classes", model_c.info->name, model_c.info->version,
            dtype_name(spec.dtype), shape_string(spec.sample_shape), spec.num_classes);
  log->info("data      train: {}{}", train_info.description, class_names_brief(train_info.class_names));
  if (parts.eval_data) log->info("data      eval: {}{}", eval_info.description, class_names_brief(eval_info.class_names));
  log->info("comm      {} {}: {}", comm_c.info->name, comm_c.info->version, parts.comm->describe());
  const std::string store_at = store && dist::describe_store(*store) != rendezvous
                                  ? fmt::format(" at {}", dist::describe_store(*store)) : "";
  log->info("dist      rendezvous {}{} (from {}); timeout {} s per collective", rendezvous.empty() ? "-" : rendezvous,
            store_at, rendezvous_from, static_cast<double>(timeout.count()) / 1000.0);
  if (ranks.world_size > 1) {
    log->info("agree     the {} ranks run the same Kiln, plugins, config and data ({} facts compared in {:.0f} ms)",
              ranks.world_size, agreement.facts, agreement_ms);
    for (const std::string& w : agreement.warnings) log->warn("{}", w);
  }
  log->info("precision {} {}: params {}, compute {}", precision_c.info->name, precision_c.info->version,
            dtype_name(parts.precision->param_dtype()), dtype_name(parts.precision->compute_dtype()));
  log->info("run dir   {}{}", outcome.run_dir.string(),
            dry_run ? " (a dry run: left as it was at the end)" : "");
  if (command.resume == "if-any") {
    log->info("resume    --resume if-any: {}", resume_from.empty()
                                                   ? fmt::format("no checkpoint in {}: a fresh run", requested)
                                                   : fmt::format("continuing from {}", resume_from.string()));
  }
  if (init_req && !resume_from.empty()) {
    log->info("init      {} not loaded: the run resumes from {}", init_req->file.string(), resume_from.string());
  }

  // ---- 7. train ----
  std::unique_ptr<io::MetricsWriter> metrics;
  if (ranks.rank == 0 && !dry_run) metrics = std::make_unique<io::MetricsWriter>(outcome.run_dir / "metrics.jsonl");
  // Kept for --dump-params; the backend reference is taken first so it is released last.
  const std::shared_ptr<Backend> backend_ref = parts.backend;
  const std::shared_ptr<Communicator> comm_ref = parts.comm;  // a dry run's last barrier
  const std::shared_ptr<Model> model_ref = parts.model;
  std::optional<Trainer> trainer;
  // <run_dir>/status.json (run_status.hpp), rank 0's, kept current after every epoch.
  std::shared_ptr<io::RunStatusFile> status;
  if (ranks.rank == 0 && !dry_run) {
    status = std::make_shared<io::RunStatusFile>(
        outcome.run_dir, io::run_status_now("running", saved.epochs_done, epochs, saved.global_step));
    to.on_epoch_end = [status](std::int64_t epochs_done, std::int64_t step) {
      status->update([&](io::RunStatus& s) {
        s.epoch = epochs_done;
        s.step = step;
      });
    };
  }
  if (profiler) {
    backend_call("a matmul and a copy measuring peaks for --profile",
                 [&] { profiler->measure_peaks(parts.precision->compute_dtype()); });
  }
  backend_call("a call from the trainer's build",
               [&] { trainer.emplace(std::move(parts), std::move(to), ranks, metrics.get()); });
  // A dry run is a start that is always undone: Ctrl-C waits for its few steps and the undoing.
  if (!dry_run) {
    if (rollback) rollback->commit();
    stop_signals_held.reset();  // a signal that came during the start takes effect now
  }
  // After commit: the rollback promises to leave what was there before untouched on a failed
  // start, and these are records of the earlier run.
  if (metrics && !resume_from.empty()) {
    const std::int64_t dropped = metrics->drop_records_after(saved.epochs_done, saved.global_step);
    if (dropped > 0) {
      log->info("metrics.jsonl: dropped {} lines written after step {} (epoch {}) before the interruption; "
                "trained again now",
                dropped, saved.global_step, saved.epochs_done);
    }
  }
  if (status) status->update([](io::RunStatus&) {});  // "running", before a stop signal could say otherwise
  // From here a rank that stops abnormally records its latest collectives (collective_recorder.hpp),
  // and rank 0 how the run ended (status.json): on an error escaping the loop, or on SIGTERM/SIGINT.
  std::optional<RecordOnStopSignal> record_on_stop;
  if (!dry_run && (recorder || status)) {  // a dry run holds the signals until it is undone
    record_on_stop.emplace([recorder, status](const std::string& why) {
      if (recorder) recorder->dump(why);
      if (status) {
        const std::string failed = status->update_or_say_why([&](io::RunStatus& s) {
          s.state = "interrupted";
          s.message = fmt::format("{} during epoch {}", why, s.epoch + 1);
        });
        if (!failed.empty()) log::get("kiln")->warn("status.json: {}", failed);
      }
    });
  }
  std::optional<StallWarning> stall_warning;  // dist.warn_after_s (stall_warning.hpp)
  if (recorder) {
    recorder->write_into(outcome.run_dir / "debug");
    if (warn_after.count() > 0) {
      stall_warning.emplace(recorder, StallWarningOptions{warn_after, static_cast<double>(timeout.count()) / 1000.0,
                                                          outcome.run_dir});
    }
  }
  try {
    outcome.result = backend_call("a call from the training loop", [&] { return trainer->run(); });
  } catch (const std::exception& e) {
    if (recorder) recorder->dump(e.what());
    if (status) {
      const std::string failed = status->update_or_say_why([&](io::RunStatus& s) {
        s.state = "failed";
        s.message = e.what();
      });
      if (!failed.empty()) log::get("kiln")->warn("status.json: {}", failed);  // the run's error is the one to report
    }
    throw;
  }
  stall_warning.reset();
  record_on_stop.reset();
  crash::set_phase("finishing (final outputs)");
  if (ranks.rank == 0 && !command.dump_params.empty()) {
    backend_call("a copy for --dump-params", [&] { dump_parameters(command.dump_params, *backend_ref, *model_ref); });
    log->info("parameters written to {}", command.dump_params.string());
  }
  if (profiler && ranks.rank == 0) profile::report(*profiler, dev, outcome.run_dir);
  if (outcome.result.dry_run) {
    for (const std::string& line : dry_run_summary(*outcome.result.dry_run, host_peak_rss_mb())) log->info("{}", line);
    {
      const CollectivePurpose purpose("dry run: every rank done before the run directory is restored");
      if (ranks.world_size > 1) comm_ref->barrier();
    }
    rollback.reset();  // rank 0: removes the directory, or what this start added to an existing one
    log->info("dry run: nothing kept in {}; run the same command without --dry-run to train",
              outcome.run_dir.string());
    log::flush();
    stop_signals_held.reset();  // a Ctrl-C during the dry run ends the process now
    return outcome;
  }
  if (status) {
    const TrainResult& r = outcome.result;
    status->update([&](io::RunStatus& s) {
      s.state = r.stopped_early.empty() ? "completed" : "stopped_early";
      s.message = !r.stopped_early.empty()     ? r.stopped_early
                  : !r.nothing_to_train.empty() ? "nothing to train: " + r.nothing_to_train
                                                : "";
      s.step = r.steps;
      if (eval_c && r.nothing_to_train.empty()) s.final_test_accuracy = r.final_eval_accuracy;
    });
  }
  // A run without [data.eval] has no test accuracy; printing 0.0000 would read as a failed model.
  if (!outcome.result.stopped_early.empty()) log->info("{}", outcome.result.stopped_early);
  if (!outcome.result.nothing_to_train.empty()) {
    log->info("done: nothing to train: {}; outputs in {}", outcome.result.nothing_to_train, outcome.run_dir.string());
  } else if (eval_c) {
    const std::optional<double>& top5 = outcome.result.final_eval_accuracy_top5;
    std::string averaged;  // [ema]: what the averaged weights (model_ema.safetensors) scored
    if (const auto& av = outcome.result.final_ema_eval) {
      averaged = fmt::format(", averaged weights {:.4f}", av->accuracy());
      if (const auto av5 = av->top_k_accuracy()) averaged += fmt::format(" (top-5 {:.4f})", *av5);
    }
    log->info("done: {} steps; final test accuracy {:.4f}{}{}; outputs in {}", outcome.result.steps,
              outcome.result.final_eval_accuracy, top5 ? fmt::format(" (top-5 {:.4f})", *top5) : "", averaged,
              outcome.run_dir.string());
  } else {
    log->info("done: {} steps; no eval split ([data.eval]), so no test accuracy; outputs in {}",
              outcome.result.steps, outcome.run_dir.string());
  }
  log::flush();
  return outcome;
}

}  // namespace kiln::train
