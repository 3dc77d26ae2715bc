// Rebuilding a finished run for evaluation (see eval_session.hpp for what and why).
#include "kiln/train/eval_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kiln/config/config.hpp"
#include "kiln/crash/crash_context.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/progress.hpp"
#include "kiln/plugin/guarded.hpp"
#include "kiln/plugin/plugin_call.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/sdk_internal/log_setup.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/class_names.hpp"
#include "kiln/train/config_plugins.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/model_table.hpp"
#include "kiln/train/freeze.hpp"
#include "kiln/train/optimizer.hpp"
#include "kiln/train/progress_values.hpp"
#include "kiln/train/wiring.hpp"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

fs::path resolve_checkpoint(const EvalRequest& r) {
  if (!r.checkpoint.empty()) {
    // load_checkpoint reads both files; naming the missing one here beats a read error.
    for (const char* file : {"model.safetensors", "trainer.safetensors"}) {
      if (!fs::exists(r.checkpoint / file)) {
        throw IoError(fmt::format("--checkpoint {}: not a complete checkpoint directory (no {})",
                                  r.checkpoint.string(), file));
      }
    }
    return r.checkpoint;
  }
  const fs::path dir = r.run_dir / "checkpoints";
  const auto latest = latest_checkpoint(dir);
  if (!latest) {
    if (const auto incomplete = checkpoints_oldest_first(dir, false); !incomplete.empty()) {
      throw IoError(fmt::format("no complete checkpoint in {}: {} lacks model.safetensors or trainer.safetensors "
                                "(copied in part?); pass --checkpoint DIR",
                                dir.string(), incomplete.back().filename().string()));
    }
    throw IoError(fmt::format("no complete checkpoint in {} (the run wrote none: checkpoint.every_epochs = 0, or "
                              "it stopped before its first); pass --checkpoint DIR",
                              dir.string()));
  }
  return *latest;
}

/// --ema: the checkpoint must hold the averaged weights; said before anything is built.
void require_averaged_weights(const fs::path& checkpoint) {
  if (!fs::exists(checkpoint / kAveragedModelFile)) {
    throw IoError(fmt::format("--ema: {} has no {}: the run kept no moving average of its weights ([ema] decay "
                              "was 0, or the checkpoint is older than [ema]); evaluate without --ema",
                              checkpoint.string(), kAveragedModelFile));
  }
}

}  // namespace

struct EvalSession::Impl {
  fs::path checkpoint;
  std::shared_ptr<Backend> backend;  // first: destroyed last, after everything that uses it
  std::shared_ptr<PrecisionPolicy> precision;
  std::shared_ptr<Model> model;
  std::shared_ptr<DataSource> data;
  std::unique_ptr<data::DataLoader> loader;
  std::unique_ptr<nn::SoftmaxCrossEntropy> loss;
  std::unique_ptr<TopKCounter> top_k;  // null: no top-5 (top_k_counter.hpp says when)
  ComputeBoundary boundary;
  std::int64_t classes = 0;
  std::vector<std::string> class_names;  // the checkpoint's, else the eval source's
  bool labeled = true;                    // the eval source's DatasetInfo::labeled
  plugin::PluginOrigin backend_origin;
  io::Progress::Options progress;  // the run's [log] progress settings, on stderr

  /// Locates a failure inside a backend call (the backend is not wrapped; run.cpp says why).
  template <class F>
  decltype(auto) backend_call(std::string_view method, F&& call) {
    try {
      return call();
    } catch (...) {
      plugin::rethrow_from_plugin_or_core(backend_origin, method);
    }
  }
};

EvalSession::EvalSession(const EvalRequest& request) : impl_(std::make_unique<Impl>()) {
  RankInfo ranks;  // one rank: rank 0 of 1
  ranks.source = "kiln eval";
  log::configure(ranks, log::Level::warn);

  if (!fs::is_directory(request.run_dir)) {
    throw IoError(fmt::format("--run-dir {}: no such directory", request.run_dir.string()));
  }
  const fs::path config_file = request.run_dir / "config.toml";
  if (!fs::exists(config_file)) {
    throw IoError(fmt::format("--run-dir {}: not a run directory (no config.toml)", request.run_dir.string()));
  }

  // ---- the whole config, by the rules `kiln train` used (run.cpp step 1) ----
  config::Config cfg = config::Config::load(config_file, request.overrides);
  const CoreTables core = validate_core_tables(cfg);
  const ParamMap& run = core.run;
  const ParamMap& loader = core.loader;
  const ParamMap& loss = core.loss;
  const ParamMap& logt = core.log;
  const std::string& optimizer_type = core.optimizer_type;
  const ParamMap& optimizer = core.optimizer;

  plugin::Registry registry(plugin::default_search_path(request.plugin_dirs));
  registry.index();  // loads only the plugins this run names (registry.hpp)
  const ConfigPlugins chosen = choose_config_plugins(cfg, registry);
  const PluginChoice& backend_c = chosen.backend;
  // The host's init keys are validated and then not used: the checkpoint holds the weights.
  // freeze says which parameters the checkpoint has no optimizer state for.
  const PluginChoice& model_c = chosen.model.plugin;
  const std::optional<FreezeRequest> freeze = freeze_request(chosen.model.host);
  if (!chosen.eval) {
    throw ConfigError(fmt::format("{} has no eval split ([data.eval]); name a data source with --set "
                                  "data.eval.type=... --set data.eval.path=...",
                                  config_file.string()));
  }
  const PluginChoice& eval_c = *chosen.eval;
  const PluginChoice& precision_c = chosen.precision;

  const std::int64_t batch = loader.get_int("batch");
  if (batch < 1) throw ConfigError(loader.where("batch") + " must be at least 1");
  const std::int64_t eval_batch = loader.get_int("eval_batch") > 0 ? loader.get_int("eval_batch") : batch;
  const double smoothing = loss.get_float("label_smoothing");
  if (!(smoothing >= 0 && smoothing < 1)) throw ConfigError(loss.where("label_smoothing") + " must be in [0, 1)");
  const auto seed = static_cast<std::uint64_t>(run.get_int("seed"));
  impl_->checkpoint = resolve_checkpoint(request);
  if (request.averaged_weights) require_averaged_weights(impl_->checkpoint);

  // ---- plugins and the checks between them (run.cpp step 3) ----
  // run_dir stays empty: the plugins must not write into the run being evaluated.
  auto args_for = [&](const PluginChoice& c) {
    PluginArgs a;
    a.params = &c.params;
    a.ranks = ranks;
    return a;
  };
  Impl& s = *impl_;
  s.progress = {.mode = io::parse_progress_mode(logt.get_string("progress"), logt.where("progress")),
                .out = stderr,
                .every_s = logt.get_float("progress_every_s")};
  s.backend_origin = plugin::origin_of(*backend_c.info);
  s.backend = registry.create_backend(*backend_c.info, args_for(backend_c));
  s.precision = plugin::guarded(registry.create_precision(*precision_c.info, args_for(precision_c)),
                                plugin::origin_of(*precision_c.info));
  s.model = plugin::guarded(registry.create_model(*model_c.info, args_for(model_c)), plugin::origin_of(*model_c.info));
  s.data = plugin::guarded(registry.create_data(*eval_c.info, args_for(eval_c)), plugin::origin_of(*eval_c.info));
  const InputSpec spec = s.model->input_spec();
  const DatasetInfo info = s.data->describe();
  check_model_data(spec, info, "data.eval", s.data->name());
  if (!request.unlabeled_ok) require_labels(info, "data.eval", s.data->name(), "kiln eval");
  s.labeled = info.labeled;
  check_batch_bytes(loader, loader.get_int("eval_batch") > 0 ? "eval_batch" : "batch", eval_batch, info, "data.eval");
  data::LoaderOptions lo = loader_options(loader, ranks, info.count, eval_batch, "eval_last_batch", data::Shuffle::no, seed);
  if (request.every_sample) lo.shard.last_batch = data::LastBatch::partial;
  (void)data::Sharder(lo.shard);
  s.precision->check_backend(*s.backend);

  // ---- build as the trainer does (trainer.cpp build()), then the checkpoint ----
  s.backend_call("a call while building the model", [&] {
    s.loader = std::make_unique<data::DataLoader>(s.data, s.backend.get(), lo);
    // The trainer sizes the model for its larger batch; the same size here keeps the build
    // identical (a model may choose its workspaces by it).
    ModelBuildContext ctx;
    ctx.backend = s.backend.get();
    ctx.param_dtype = s.precision->param_dtype();
    ctx.compute_dtype = s.precision->compute_dtype();
    ctx.max_batch = std::max(batch, eval_batch);
    ctx.seed = seed;
    s.model->build(ctx);
    s.classes = spec.num_classes;
    s.loss = std::make_unique<nn::SoftmaxCrossEntropy>(static_cast<float>(smoothing));
    s.loss->build(*s.backend, ctx.max_batch, spec.num_classes);
    if (const auto why_not = TopKCounter::not_counted(*s.backend, spec.num_classes); !request.top_k_accuracy) {
      // Predictions are ranked on the host; a count nobody reports would cost an op per batch.
    } else if (!why_not) {
      s.top_k = std::make_unique<TopKCounter>(*s.backend);
    } else if (spec.num_classes > kTopK) {
      log::get("eval")->info("no top-{} accuracy: {}", kTopK, *why_not);
    }
    s.boundary.build(*s.backend, ctx.compute_dtype, spec, ctx.max_batch, std::string(s.model->name()));
    // load_checkpoint restores the optimizer state too; an optimizer of the run's kind takes it,
    // which also checks that trainer.safetensors belongs to this model.
    const std::unique_ptr<Optimizer> opt = make_optimizer(optimizer_type, optimizer);
    if (freeze) opt->exclude(FrozenParameters(s.model->parameters(), *freeze, s.model->name()).names());
    const TrainerState st = load_checkpoint(s.checkpoint, *s.backend, *s.model, *opt);
    // The averages replace the weights and buffers just loaded; the rest (class names, precision
    // state, the check that the checkpoint fits this model) stays the checkpoint's.
    if (request.averaged_weights) load_model_weights(s.checkpoint / kAveragedModelFile, *s.backend, *s.model);
    s.precision->load_state(st.precision);
    s.class_names = st.class_names;
  });
  // The checkpoint's names say what the outputs mean; data that numbers classes otherwise would be
  // scored (and predicted) against the wrong outputs without a sign.
  const std::string from_checkpoint = fmt::format("the checkpoint {}", s.checkpoint.string());
  if (const auto conflict = class_names_conflict(s.class_names, from_checkpoint, info.class_names, "[data.eval]")) {
    throw ConfigError(fmt::format("the eval data's classes differ from those the checkpoint was trained on: {}; "
                                  "evaluate with data of the same classes in the same order",
                                  *conflict));
  }
  if (s.class_names.empty()) s.class_names = info.class_names;  // a checkpoint from before names were kept
}

EvalSession::~EvalSession() = default;

EvalSums EvalSession::run(const LogitsCallback& on_logits) {
  Impl& s = *impl_;
  // On stderr: stdout carries only the result (a --json document, predictions' summary).
  io::Progress progress(s.progress);
  progress.begin("eval", s.loader->steps_per_epoch());
  double seen = 0;
  EvalParts parts{s.backend.get(), s.model.get(), s.precision.get(), s.loader.get(), s.loss.get(), &s.boundary,
                  {}, s.top_k.get()};
  // For the fatal-signal report: the step is the batch being evaluated (the hook runs after each).
  crash::set_phase("evaluating a checkpoint");
  const std::int64_t steps = s.loader->steps_per_epoch();
  crash::set_step(1, steps);
  parts.after_batch = [&](const data::Batch& batch) {
    crash::set_step(std::min(batch.step + 2, steps), steps);
    seen += static_cast<double>(batch.valid_rows);  // one rank: its samples are all of them
    if (progress.due()) {
      const auto [loss_sum, correct] = s.loss->totals();
      progress.update(batch.step + 1, seen, eval_progress_values(loss_sum, correct, seen));
    }
  };
  const EvalSums sums = s.backend_call("a call from the evaluation", [&] { return evaluate_pass(parts, 0, on_logits); });
  progress.clear();
  // NaN logits still have an argmax (class 0 on the cpu backend) but no top 5: the accuracies
  // would be numbers about nothing (and top-5 below top-1), the predictions NaN.
  if (sums.samples > 0 && !std::isfinite(sums.loss())) {
    throw NumericError(fmt::format(
        "the loss over the {} samples evaluated is {}: the model's outputs are not finite, so no accuracy or "
        "prediction of them means anything; either the weights in {} diverged (evaluate an earlier checkpoint "
        "with --checkpoint) or the input overflows the model (check [data.eval]'s normalisation)",
        static_cast<std::int64_t>(sums.samples), std::isnan(sums.loss()) ? "NaN" : "infinite", s.checkpoint.string()));
  }
  return sums;
}

EvalSums EvalSession::run_on_host(const HostBatchCallback& on_batch) {
  Backend& backend = *impl_->backend;
  return run([&](const data::Batch& batch, const Tensor& labels, const Tensor& logits) {
    Tensor host_logits = host_tensor(logits.shape(), DType::f32);
    Tensor host_labels = host_tensor(labels.shape(), DType::i32);
    backend.copy(logits, host_logits);
    backend.copy(labels, host_labels);
    backend.synchronize();
    on_batch(batch.valid_rows, static_cast<const std::int32_t*>(host_labels.data()),
             static_cast<const float*>(host_logits.data()));
  });
}

const fs::path& EvalSession::checkpoint() const { return impl_->checkpoint; }
std::int64_t EvalSession::num_classes() const { return impl_->classes; }
bool EvalSession::labeled() const { return impl_->labeled; }
std::string EvalSession::sample_id(std::int64_t index) const { return impl_->data->sample_id(index); }
const std::vector<std::string>& EvalSession::class_names() const { return impl_->class_names; }

}  // namespace kiln::train
