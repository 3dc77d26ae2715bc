// The epoch loop (see trainer.hpp for the order of operations).
#include "kiln/train/trainer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <vector>

#include "kiln/crash/crash_context.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/progress_format.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/rng.hpp"
#include "kiln/train/accumulation.hpp"
#include "kiln/train/bn_sync.hpp"
#include "kiln/train/collective_purpose.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/checkpoint_policy.hpp"
#include "kiln/train/freeze.hpp"
#include "kiln/train/grad_clip.hpp"
#include "kiln/train/init_weights.hpp"
#include "kiln/train/loss_guard.hpp"
#include "kiln/train/shard_check.hpp"
#include "kiln/train/compute_boundary.hpp"
#include "kiln/train/evaluate.hpp"
#include "kiln/train/grad_sync.hpp"
#include "kiln/train/loss_mark.hpp"
#include "kiln/sdk/param_runs.hpp"
#include "kiln/train/param_sync.hpp"
#include "kiln/train/progress_values.hpp"
#include "kiln/train/step_metrics.hpp"
#include "kiln/train/sync_batch_norm.hpp"
#include "kiln/train/top_k_counter.hpp"
#include "kiln/train/weight_ema.hpp"
#include "kiln/train/weight_histograms.hpp"

namespace kiln::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Sums of one epoch's statistics, reduced over ranks: the evaluation pass's sums (top-5 hits
/// only for the test split, where the run counts them), added up over the ranks.
using SplitTotals = EvalSums;

}  // namespace

std::vector<const WatchedMetric*> watched_metrics(const TrainerOptions& o) {
  std::vector<const WatchedMetric*> out;
  if (o.early_stop) out.push_back(&o.early_stop->metric);
  if (o.keep_best) out.push_back(&*o.keep_best);
  if (o.lr_plateau) out.push_back(&o.lr_plateau->metric);
  return out;
}

struct Trainer::Impl {
  RunParts parts;
  TrainerOptions opt;
  RankInfo ranks;
  io::MetricsWriter* metrics;
  std::shared_ptr<const log::Logger> log = log::get("train");
  std::unique_ptr<data::DataLoader> train_loader, eval_loader;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<GradSync> grad_sync;
  std::unique_ptr<LossMark> loss_mark;  // the loss check inside the gradients' all-reduce (null: its own)
  std::unique_ptr<BufferSync> buffer_sync;  // rank 0's BN statistics before eval and checkpoints
  std::unique_ptr<CommBatchNormSync> sync_bn;  // [model] sync_bn: BN statistics of the global batch
  std::unique_ptr<AccumulationPlan> accumulation;
  std::unique_ptr<GradClipper> clipper;  // null: no clipping
  std::unique_ptr<CheckpointPolicy> checkpoints;
  std::optional<EarlyStopper> early_stop;
  nn::SoftmaxCrossEntropy loss;
  std::unique_ptr<TopKCounter> top_k;  // the test split's top-5 (null: no eval split, or not counted)
  std::unique_ptr<WeightEma> ema;        // [ema] (null: off)
  std::vector<Tensor> ema_scratch;       // the model's own weights while the averages are evaluated
  ComputeBoundary boundary;  // the casts between f32 data/loss and the model's compute dtype
  std::vector<Tensor> grad_zero_views;
  FrozenParameters frozen;                  // [model] freeze; empty: every parameter trains
  std::vector<Tensor> frozen_grad_views;    // zeroed after backward (freeze.hpp says why)
  io::Progress progress;
  StepMetrics step_metrics;  // [log] every_steps records
  std::int64_t global_step = 0;
  std::int64_t start_epoch = 0;
  std::int64_t start_step = 0;  // loader steps of start_epoch done before a mid-epoch resume
  // What the steps before a mid-epoch resume added to that epoch's train metrics (reduced over
  // ranks when the checkpoint was written; carried by rank 0 only, so the sum counts it once).
  SplitTotals resumed_partial;

  Impl(RunParts p, TrainerOptions o, const RankInfo& r, io::MetricsWriter* m)
      : parts(std::move(p)), opt(std::move(o)), ranks(r), metrics(m), loss(opt.label_smoothing),
        progress(io::Progress::Options{.mode = opt.progress, .enabled = r.rank == 0, .every_s = opt.progress_every_s}),
        step_metrics(opt.metrics_every_steps, m,
                     [this](const std::vector<double>& v) {
                       const CollectivePurpose purpose("step metrics");
                       return sum_over_ranks(backend(), *parts.comm, v);
                     }) {}

  Backend& backend() { return *parts.backend; }

  void build() {
    PrecisionPolicy& precision = *parts.precision;
    precision.check_backend(backend());
    train_loader = std::make_unique<data::DataLoader>(parts.train_data, parts.backend.get(), opt.train_loader);
    if (parts.eval_data) {
      eval_loader = std::make_unique<data::DataLoader>(parts.eval_data, parts.backend.get(), opt.eval_loader);
    }
    const std::int64_t max_batch = std::max(opt.train_loader.shard.batch, eval_loader ? opt.eval_loader.shard.batch : 0);
    ModelBuildContext ctx;
    ctx.backend = parts.backend.get();
    ctx.param_dtype = precision.param_dtype();
    ctx.compute_dtype = precision.compute_dtype();
    ctx.max_batch = max_batch;
    ctx.seed = opt.seed;
    if (opt.sync_bn) {
      sync_bn = std::make_unique<CommBatchNormSync>(backend(), *parts.comm);
      ctx.batch_norm_sync = sync_bn.get();
    }
    if (opt.freeze) {
      ctx.frozen = [&request = *opt.freeze](std::string_view name) { return request.matches(name); };
      ctx.frozen_bn = opt.freeze->batch_norm;
    }
    parts.model->build(ctx);
    if (sync_bn) {
      sync_bn->require_layers(parts.model->name(), *opt.sync_bn);
      log->info("{}", sync_bn->describe());
    }
    loss.build(backend(), max_batch, parts.model->input_spec().num_classes);
    if (eval_loader) build_top_k(parts.model->input_spec().num_classes);
    boundary.build(backend(), ctx.compute_dtype, parts.model->input_spec(), max_batch,
                   std::string(parts.model->name()));

    auto params = parts.model->parameters();
    std::optional<std::string> frozen_bn_line;  // [model] frozen_bn = "eval": what the model keeps
    if (opt.freeze) {
      frozen = FrozenParameters(params, *opt.freeze, parts.model->name());
      frozen_bn_line = check_frozen_buffers(parts.model->buffers(), *opt.freeze, parts.model->name());
    }
    optimizer = make_optimizer(opt.optimizer_type, opt.optimizer_table);
    optimizer->exclude(frozen.names());  // before a resume reads the optimizer state
    data::ShardOptions shard = opt.train_loader.shard;
    shard.count = train_loader->info().count;
    accumulation = std::make_unique<AccumulationPlan>(shard, opt.accumulate_steps);
    if (opt.early_stop) early_stop.emplace(*opt.early_stop);
    std::optional<TrainerState> resumed;  // the schedule, made below, takes its state from it
    if (!opt.resume_from.empty()) {
      const TrainerState& st = resumed.emplace(load_checkpoint(opt.resume_from, backend(), *parts.model, *optimizer));
      precision.load_state(st.precision);
      if (early_stop) early_stop->load_state(st.extra);
      start_epoch = st.epochs_done;
      crash::set_last_checkpoint(opt.resume_from.string());  // verified whole just now
      start_step = st.epoch_steps_done;
      if (start_step > 0 && ranks.rank == 0) {
        auto get = [&](const char* k) { return st.extra.count(k) ? st.extra.at(k) : 0.0; };
        resumed_partial = SplitTotals{get("epoch.loss_sum"), get("epoch.correct"), get("epoch.samples")};
      }
      global_step = st.global_step;
      if (start_step >= accumulation->loader_steps_per_epoch()) {
        throw DataError(fmt::format("{}: the checkpoint is {} steps into an epoch of {}; {}", opt.resume_from.string(),
                                    start_step, accumulation->loader_steps_per_epoch(), kDamagedHint));
      }
      log->info("resumed from {}: {} epochs done{}, step {}", opt.resume_from.string(), start_epoch,
                start_step > 0 ? fmt::format(" and {} steps of epoch {}", start_step, start_epoch + 1) : "",
                global_step);
    } else if (opt.load_init) {  // rank 0 loads; every rank learns whether it worked
      (void)load_init_weights_on_rank0(opt.init.get(), backend(), *parts.comm, *parts.model);
    }
    checkpoints = std::make_unique<CheckpointPolicy>(
        CheckpointPolicyOptions{opt.checkpoint_every, opt.checkpoint_every_steps, opt.checkpoint_keep, opt.keep_best},
        opt.checkpoint_dir);
    broadcast_initial_parameters(backend(), *parts.comm, params, parts.model->buffers());
    buffer_sync = std::make_unique<BufferSync>(backend(), *parts.comm, parts.model->buffers());
    if (!parts.model->buffers().empty()) log->info("model buffers: {}", buffer_sync->describe());
    if (opt.ema) build_ema(resumed.has_value());  // after the broadcast: every rank averages from the same start
    grad_sync = std::make_unique<GradSync>(*parts.comm, params, opt.bucket_bytes, frozen.names());
    if (ranks.world_size > 1 && opt.stop_on_nonfinite_loss) {
      loss_mark = LossMark::make(backend(), grad_sync->carrier());
      if (!loss_mark) {
        log->info("loss check: one all-reduce of its own per check (no f32 gradient to carry it, or no f32 "
                  "scale/add on the backend)");
      }
    }
    grad_zero_views = sdk::grad_runs(params);  // one fill per contiguous gradient run
    frozen_grad_views = frozen.grad_views(params);
    if (opt.clip_grad_norm > 0) clipper = std::make_unique<GradClipper>(backend(), params, opt.clip_grad_norm);
    // The schedule counts optimizer steps, so with accumulation an epoch is fewer of them.
    schedule = std::make_unique<LrSchedule>(opt.schedule_type, opt.schedule_table,
                                            opt.optimizer_table.get_float("lr"),
                                            accumulation->updates_per_epoch(), opt.epochs, opt.lr_plateau);
    if (resumed) load_schedule_state(*resumed);
    std::int64_t count = 0;
    for (const auto& p : params) count += p.value.numel();
    log->info("model {}: {} parameters in {} tensors; optimizer {}; lr schedule {}; grad sync {}",
              parts.model->name(), count, params.size(), optimizer->describe(), schedule->describe(),
              grad_sync->describe());
    log->info("{} steps per epoch, per-rank batch {}, global batch {}", train_loader->steps_per_epoch(),
              opt.train_loader.shard.batch, opt.train_loader.shard.batch * ranks.world_size);
    // What this rank reads, in its own log (pain #8); checked across ranks on request.
    if (ranks.world_size > 1) log->info("shard: {}", shard_line(data::Sharder(shard), start_epoch));
    if (opt.check_sharding) log->info("{}", check_sharding(backend(), *parts.comm, shard, start_epoch, opt.epochs));
    if (opt.accumulate_steps > 1) {
      // A group never spans epochs: the last one holds what is left of the epoch.
      const std::int64_t micro_steps = train_loader->steps_per_epoch();
      const std::int64_t last_group = micro_steps - (accumulation->updates_per_epoch() - 1) * opt.accumulate_steps;
      log->info("gradient accumulation: {} micro-steps per optimizer step ({} optimizer steps per epoch, {} rows "
                "each{})",
                opt.accumulate_steps, accumulation->updates_per_epoch(),
                opt.accumulate_steps * opt.train_loader.shard.batch * ranks.world_size,
                last_group == opt.accumulate_steps
                    ? ""
                    : fmt::format("; the epoch's last has {} micro-step{}", last_group, last_group == 1 ? "" : "s"));
    }
    if (clipper) log->info("gradient clipping: global L2 norm at most {}", clipper->max_norm());
    if (!frozen.empty()) log->info("{}", frozen.describe(params));
    if (frozen_bn_line) log->info("{}", *frozen_bn_line);
  }

  /// The moving average starts at the weights the run starts from, or continues from the
  /// checkpoint's model_ema.safetensors when resuming.
  void build_ema(bool resuming) {
    ema = std::make_unique<WeightEma>(backend(), parts.model->parameters(), parts.model->buffers(), *opt.ema);
    log->info("weight average (ema): {}", ema->describe());
    if (resuming && !load_averages(opt.resume_from, backend(), *ema)) {
      log->info("ema: {} holds no {} (written without [ema]); the average starts from its weights",
                opt.resume_from.string(), kAveragedModelFile);
    }
  }

  /// The plateau schedule continues where the checkpoint's run left it (lr_plateau.hpp).
  void load_schedule_state(const TrainerState& st) {
    try {
      schedule->load_state(st.extra);
    } catch (const DataError& e) {
      throw DataError(fmt::format("{}: {}; {}", opt.resume_from.string(), e.what(), kDamagedHint));
    }
    if (const LrPlateau* p = schedule->plateau(); p && p->reductions() > 0) {
      log->info("lr schedule: rate {:.6g} after {} reduction{} on a plateau (from the checkpoint)",
                schedule->at(global_step), p->reductions(), p->reductions() == 1 ? "" : "s");
    }
  }

  /// The test split's top-5 counter where it says something, and a clear refusal when early
  /// stopping or keep_best watch a top-5 the run cannot count (`kiln train` checks that before
  /// its banner; this is for code that builds a Trainer itself).
  void build_top_k(std::int64_t classes) {
    check_watched_top_k(backend(), classes, watched_metrics(opt));
    const std::optional<std::string> why_not = TopKCounter::not_counted(backend(), classes);
    if (!why_not) {
      top_k = std::make_unique<TopKCounter>(backend());
    } else if (classes > kTopK) {
      log->info("no top-{} accuracy in the test records: {}", kTopK, *why_not);
    }
  }

  /// top_k_hits travels in every reduction (0 where none is counted), so every rank makes the
  /// same collective whatever it counts.
  SplitTotals reduce(double loss_sum, double correct, double samples,
                     std::optional<double> top_k_hits = std::nullopt) {
    const CollectivePurpose purpose("epoch metrics (loss, correct, samples, top-5 hits)");
    const auto v = sum_over_ranks(backend(), *parts.comm, {loss_sum, correct, samples, top_k_hits.value_or(0.0)});
    SplitTotals t{v[0], v[1], v[2], std::nullopt};
    if (top_k_hits) t.top_k_hits = v[3];
    return t;
  }

  struct EpochStats {
    SplitTotals totals;
    double seconds = 0, wait_seconds = 0, global_samples = 0;
    double comm_wait_seconds = 0;  // time the trainer blocked in GradSync::finish (not overlapped)
    data::DataLoader::Stats loader;  // decoded samples and worker seconds during this epoch
    std::int64_t steps = 0, skipped = 0;
    std::int64_t updates = 0;                       // optimizer steps (groups of micro-steps)
    double grad_norm_sum = 0;                       // pre-clip norms of the applied steps
    std::int64_t clipped = 0, norms = 0;
    std::vector<double> step_seconds;  // a dry run's optimizer steps, each timed (dry_run.hpp)
  };

  /// The loop's position and state, for a checkpoint after `epochs_done` epochs and
  /// `epoch_steps_done` loader steps of the next.
  TrainerState position(std::int64_t epochs_done, std::int64_t epoch_steps_done) const {
    TrainerState st;
    st.epochs_done = epochs_done;
    st.epoch_steps_done = epoch_steps_done;
    st.global_step = global_step;
    st.seed = static_cast<std::int64_t>(opt.seed);
    st.precision = parts.precision->state();
    st.run = opt.run_identity;
    st.class_names = opt.class_names;
    if (early_stop) st.extra = early_stop->state();
    st.extra.merge(schedule->state());
    return st;
  }

  /// Stops the run rather than write a checkpoint of weights that are not finite (loss_guard.hpp),
  /// unless the user turned the divergence stop off. After from_rank0: every rank holds the
  /// same weights and buffers, so every rank decides the same.
  void stop_if_weights_diverged(const std::filesystem::path& checkpoint) {
    if (opt.stop_on_nonfinite_loss) stop_if_weights_nonfinite(backend(), *parts.comm, *parts.model, checkpoint.string());
  }

  void save_rotating(const TrainerState& st) {
    buffer_sync->from_rank0();  // the saved statistics are the ones every rank used
    stop_if_weights_diverged(opt.checkpoint_dir / checkpoint_name(st));
    save_checkpoint(opt.checkpoint_dir, opt.checkpoint_keep, backend(), *parts.comm, *parts.model, *optimizer,
                    *parts.precision, st, ema.get());
  }

  EpochStats train_epoch(std::int64_t epoch, std::int64_t first_step) {
    auto params = parts.model->parameters();
    Model& model = *parts.model;
    PrecisionPolicy& precision = *parts.precision;
    EpochStats st;
    loss.reset_totals();
    double local_samples = 0;
    const SplitTotals carried = first_step > 0 ? resumed_partial : SplitTotals{};
    crash::set_phase("training");
    crash::set_epoch(epoch + 1, opt.epochs);
    train_loader->start_epoch(epoch, first_step);
    const auto loader_before = train_loader->stats();
    const auto t0 = Clock::now();
    const std::int64_t steps = train_loader->steps_per_epoch();
    progress.begin(fmt::format("epoch {}/{}", epoch + 1, opt.epochs), steps);
    step_metrics.start_epoch();
    std::int64_t first_unchecked_step = first_step;  // of the non-finite loss check
    auto step_start = t0;                            // a dry run times each optimizer step
    while (auto batch = train_loader->next()) {
      st.wait_seconds += batch->wait_seconds;
      crash::set_step(batch->step + 1, steps);
      const double lr = schedule->at(global_step);
      // Accumulation (accumulation.hpp): the weights change only after a group's last
      // micro-step, and only that one's backward hands GradSync its callback.
      const MicroStep micro = accumulation->at(batch->step);
      // An optimizer step begins with its group's first micro-step (and ends after its last).
      if (micro.first && opt.on_step_begin) opt.on_step_begin();
      if (micro.first) precision.before_forward(backend(), params);
      if (micro.last) grad_sync->begin_step();
      // The running loss sum is checked every loss_check_every steps and at the epoch's last step
      // (reading it waits for a device's queue), so the step, or the window, named is where the
      // loss first went non-finite.
      const bool loss_check_due = opt.stop_on_nonfinite_loss && micro.last &&
                                  ((micro.group + 1) % opt.loss_check_every == 0 || batch->step + 1 == steps);
      // Before any bucket of this step is all-reduced, and after this step's loss is in the sum.
      const auto mark_loss = [&] {
        if (loss_check_due && loss_mark) loss_mark->add(loss.loss_sum_on_device());
      };
      if (batch->rows > 0) {
        const Tensor x = backend().to_device(batch->inputs);
        const Tensor y = backend().to_device(batch->labels);
        // The uploads may still be queued (CUDA): the loader must not refill this batch's pinned
        // slot before they are done.
        train_loader->release_after(backend().record_event(StreamKind::compute));
        // Dropout masks follow the loader step (= global_step without accumulation).
        const std::int64_t micro_index = epoch * steps + batch->step;
        const std::uint64_t step_seed = derive_seed(opt.seed, 0xD50u, static_cast<std::uint64_t>(micro_index),
                                                    static_cast<std::uint64_t>(ranks.rank));
        // The model sees the compute dtype only; the loss and its gradient are f32.
        const Tensor logits = boundary.logits(model.forward(boundary.input(x), Mode::train, step_seed));
        loss.forward(logits, y, batch->rows);
        mark_loss();
        // d(mean loss over the global batch) = sum over ranks (and over the accumulation
        // group's micro-steps) of (scale / global rows of the group) * d(loss sum).
        // The scale is applied in f32 before the cast down, so fp16's loss scale lifts small
        // gradients above f16's underflow before they are rounded.
        const float scale = precision.loss_scale() / static_cast<float>(micro.group_rows);
        model.backward(boundary.dlogits(loss.backward(scale)),
                       micro.last ? grad_sync->ready_callback() : GradReadyFn([](std::size_t) {}));
        local_samples += static_cast<double>(batch->rows);
      } else {
        mark_loss();
      }
      st.global_samples += static_cast<double>(batch->global_rows);
      ++st.steps;
      if (!micro.last) continue;  // no collective, no update: the gradients keep adding up
      const auto sync_start = Clock::now();
      grad_sync->finish();
      st.comm_wait_seconds += seconds_since(sync_start);
      // Frozen gradients were computed by backward but not reduced: zeroed, they count for
      // nothing in the precision policy's checks, the clipping norm or the optimizer.
      for (const Tensor& g : frozen_grad_views) backend().fill(g, 0.0);
      // Before the optimizer step: a diverged step must not reach the weights or a checkpoint.
      if (loss_check_due) {
        const bool every_rank_finite = loss_mark && !loss_mark->nan_after_sum();
        stop_if_loss_nonfinite(backend(), *parts.comm, ranks.world_size, loss.totals().first, every_rank_finite,
                               {epoch, opt.epochs, batch->step, steps, first_unchecked_step, lr});
        first_unchecked_step = batch->step + 1;
      }
      ++st.updates;
      if (precision.after_allreduce(backend(), params) == StepDecision::apply) {
        // Clipped after unscaling, so the threshold applies to the true gradient.
        if (clipper) {
          const double norm = clipper->clip();
          st.grad_norm_sum += norm;
          ++st.norms;
          st.clipped += norm > clipper->max_norm();
        }
        optimizer->step(backend(), params, static_cast<float>(lr));
      } else {
        ++st.skipped;
      }
      for (const Tensor& g : grad_zero_views) backend().fill(g, 0.0);
      ++global_step;
      if (ema) ema->after_step(global_step);
      if (opt.on_step_end) opt.on_step_end();
      if (checkpoints->step_checkpoint_due(global_step, batch->step + 1 == steps)) {
        // The epoch's metrics so far go into the checkpoint, so a resumed epoch reports all of it.
        const auto [loss_sum, correct] = loss.totals();
        const SplitTotals part = reduce(loss_sum + carried.loss_sum, correct + carried.correct,
                                        local_samples + carried.samples);
        TrainerState here = position(epoch, batch->step + 1);
        here.extra["epoch.loss_sum"] = part.loss_sum;
        here.extra["epoch.correct"] = part.correct;
        here.extra["epoch.samples"] = part.samples;
        save_rotating(here);
      }
      if (step_metrics.due(global_step)) {
        const auto [loss_sum, correct] = loss.totals();
        step_metrics.record(epoch + 1, global_step, lr,
                            {loss_sum, correct, local_samples, st.global_samples, st.wait_seconds,
                             st.comm_wait_seconds, st.steps},
                            precision.metrics());
      }
      // Reading the running loss waits for a GPU's queue: only when the display will show it.
      if (progress.due()) {
        const auto [loss_sum, correct] = loss.totals();
        progress.update(batch->step + 1, st.global_samples,
                        train_progress_values(loss_sum, correct, local_samples, lr, precision.metrics()));
      }
      if (opt.dry_run_steps > 0) {
        backend().synchronize();  // the step's time is where its work was done, queued or not
        const auto now = Clock::now();
        st.step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
        step_start = now;
        if (st.updates >= opt.dry_run_steps) break;  // every rank at the same step: no collective left open
      }
    }
    backend().synchronize();
    st.seconds = seconds_since(t0);
    const auto loader_after = train_loader->stats();
    st.loader.samples = loader_after.samples - loader_before.samples;
    st.loader.busy_seconds = loader_after.busy_seconds - loader_before.busy_seconds;
    const auto [loss_sum, correct] = loss.totals();
    st.totals = reduce(loss_sum + carried.loss_sum, correct + carried.correct, local_samples + carried.samples);
    return st;
  }

  /// `label` names the pass in the progress display: "eval " for the model, "ema  " for its average.
  SplitTotals evaluate(std::int64_t epoch, const char* label = "eval ") {
    const crash::PhaseScope phase("evaluating");
    crash::set_step(0, 0);
    buffer_sync->from_rank0();  // every rank evaluates the model a checkpoint saves
    progress.begin(fmt::format("{} {}/{}", label, epoch + 1, opt.epochs), eval_loader->steps_per_epoch());
    double local_seen = 0, global_seen = 0;
    EvalParts eval{&backend(), parts.model.get(), parts.precision.get(), eval_loader.get(), &loss, &boundary, {},
                   top_k.get(), opt.dry_run_steps};
    eval.after_batch = [&](const data::Batch& b) {
      local_seen += static_cast<double>(b.valid_rows);
      global_seen += static_cast<double>(b.global_valid);
      if (progress.due()) {
        const auto [loss_sum, correct] = loss.totals();
        progress.update(b.step + 1, global_seen, eval_progress_values(loss_sum, correct, local_seen));
      }
    };
    const EvalSums local = evaluate_pass(eval, epoch);
    return reduce(local.loss_sum, local.correct, local.samples, local.top_k_hits);
  }

  /// The same pass with the averaged weights in the model (and rank 0's averaged statistics, which
  /// evaluate() broadcasts), then the model's own weights back.
  SplitTotals evaluate_averaged(std::int64_t epoch) {
    AveragedWeightsInModel averaged(backend(), *ema, ema_scratch);
    const SplitTotals t = evaluate(epoch, "ema  ");
    averaged.restore();
    return t;
  }

  bool evaluates_averages() const { return ema && eval_loader && ema->options().evaluate; }

  enum class EvalOf : std::uint8_t { model, average };

  /// One of the epoch's evaluations: the pass, its record ("test", or "test_ema" for the moving
  /// average) and its part of the epoch line.
  SplitTotals evaluate_and_record(std::int64_t epoch, EvalOf of, double lr, std::string& line) {
    const bool average = of == EvalOf::average;
    const auto t0 = Clock::now();
    const SplitTotals t = average ? evaluate_averaged(epoch) : evaluate(epoch);
    const double seconds = seconds_since(t0);
    write(epoch, average ? "test_ema" : "test", t, t.samples / std::max(1e-9, seconds), lr, seconds, nullptr);
    line += fmt::format("  |  {} loss {:.4f} acc {:.4f}", average ? "ema" : "test", t.loss(), t.accuracy());
    if (const auto top5 = t.top_k_accuracy()) line += fmt::format(" top-5 {:.4f}", *top5);
    return t;
  }

  void write(std::int64_t epoch, const char* split, const SplitTotals& t, double samples_per_s, double lr,
             double seconds, const EpochStats* train) {
    if (!metrics) return;
    io::MetricsRecord rec;
    rec.add("epoch", epoch + 1)
        .add("step", global_step)
        .add("split", std::string(split))
        .add("loss", t.loss())
        .add("accuracy", t.accuracy());
    if (const auto top5 = t.top_k_accuracy()) rec.add("accuracy_top5", *top5);
    rec.add("samples", static_cast<std::int64_t>(t.samples))
        .add("samples_per_s", samples_per_s)
        .add("lr", lr)
        .add("time_s", seconds);
    if (train) {
      rec.add("data_wait_s", train->wait_seconds);
      rec.add("data_wait_ms_per_step",
              train->steps > 0 ? 1e3 * train->wait_seconds / static_cast<double>(train->steps) : 0.0);
      // What the input pipeline could deliver on its own: samples per second of worker time,
      // times the workers. Far above samples_per_s means input is not the bottleneck.
      const double per_worker = train->loader.busy_seconds > 0
                                    ? static_cast<double>(train->loader.samples) / train->loader.busy_seconds
                                    : 0.0;
      rec.add("data_capacity_samples_per_s", per_worker * train_loader->workers());
      for (const auto& [k, v] : parts.train_data->counters()) rec.add("data_" + k, v);
      for (const auto& [k, v] : backend().counters()) rec.add("device_" + k, v);
      // Exposed communication: how long each step waited for gradient all-reduces after
      // backward finished (what overlap did not hide).
      rec.add("comm_wait_s", train->comm_wait_seconds);
      rec.add("exposed_comm_ms_per_step",
              train->updates > 0 ? 1e3 * train->comm_wait_seconds / static_cast<double>(train->updates) : 0.0);
      if (clipper) {
        rec.add("grad_norm", train->norms > 0 ? train->grad_norm_sum / static_cast<double>(train->norms) : 0.0);
        rec.add("clipped_steps_epoch", train->clipped);
      }
      rec.add("skipped_steps_epoch", train->skipped);
      for (const auto& [k, v] : parts.precision->metrics()) rec.add(k, v);
    }
    metrics->write(rec);
  }

  /// A few steps of the first epoch and as many eval batches, timed; nothing recorded or saved.
  DryRunReport dry_run() {
    DryRunReport r;
    const EpochStats st = train_epoch(start_epoch, start_step);
    r.step_seconds = st.step_seconds;
    r.steps_per_epoch = accumulation->updates_per_epoch();
    r.epoch = start_epoch + 1;
    r.epochs_left = std::max<std::int64_t>(0, opt.epochs - start_epoch);
    r.evals_left = 0;  // an early stop cannot be foreseen
    for (std::int64_t e = start_epoch; e < opt.epochs; ++e) {
      if (evaluates_after(e)) ++r.evals_left;
    }
    r.train_loss = st.totals.loss();
    if (eval_loader) {
      const auto te = Clock::now();
      (void)evaluate(start_epoch);  // reduced over the ranks like a real epoch's: the same collectives
      if (evaluates_averages()) {  // a real epoch evaluates both: so does the estimate
        (void)evaluate_averaged(start_epoch);
        r.eval_passes = 2;
      }
      r.eval_seconds = seconds_since(te);
      r.eval_batches = std::min(opt.dry_run_steps, eval_loader->steps_per_epoch());
      r.eval_batches_per_epoch = eval_loader->steps_per_epoch();
    }
    if (opt.dry_run_checkpoint) {  // what the real run's first checkpoint will meet: disk, permissions, time
      const std::filesystem::path dir = opt.checkpoint_dir / "dry-run";
      const auto tc = Clock::now();
      buffer_sync->from_rank0();
      stop_if_weights_diverged(dir);
      save_checkpoint_to(dir, backend(), *parts.comm, *parts.model, *optimizer, *parts.precision,
                         position(start_epoch + 1, 0), ema.get());
      r.checkpoint_seconds = seconds_since(tc);
      std::error_code ec;  // rank 0 wrote it; the others report no size
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        if (e.is_regular_file(ec)) r.checkpoint_mb += static_cast<double>(e.file_size(ec)) / 1e6;
      }
    }
    progress.clear();
    const auto counters = backend().counters();
    if (const auto it = counters.find("allocator_peak_mib"); it != counters.end()) r.device_peak_mib = it->second;
    return r;
  }

  /// A resumed run whose checkpoint leaves nothing to do: a relaunch of a finished job (a restart
  /// loop, `--resume if-any`) ends at once and says why, rather than "done" with a test accuracy
  /// of 0 that no epoch measured. Empty when there is training left.
  std::string why_nothing_to_train() const {
    if (opt.resume_from.empty() || start_step > 0) return {};
    if (start_epoch >= opt.epochs) {
      return fmt::format("{} was written after epoch {}, and run.epochs = {}; raise it to train further (--set "
                         "run.epochs={})",
                         opt.resume_from.string(), start_epoch, opt.epochs, start_epoch + 1);
    }
    if (early_stop && early_stop->has_stopped()) {
      return fmt::format("the run stopped early after epoch {} ({}), and {} is that epoch's checkpoint; raise "
                         "early_stop.patience, or set early_stop.metric = \"\", to train further",
                         start_epoch, early_stop->reason(), opt.resume_from.string());
    }
    return {};
  }

  /// run.eval_every_epochs: whether epoch `epoch` (0-based) ends with an evaluation, early stops
  /// aside (the epoch one ends the run with is evaluated too).
  bool evaluates_after(std::int64_t epoch) const {
    return epoch + 1 == opt.epochs || (epoch + 1) % opt.eval_every_epochs == 0;
  }

  TrainResult run() {
    TrainResult result;
    if (opt.dry_run_steps > 0) {
      result.dry_run = dry_run();
      result.steps = global_step;
      return result;
    }
    result.nothing_to_train = why_nothing_to_train();
    if (!result.nothing_to_train.empty()) {
      result.steps = global_step;
      return result;
    }
    for (std::int64_t epoch = start_epoch; epoch < opt.epochs; ++epoch) {
      const EpochStats st = train_epoch(epoch, epoch == start_epoch ? start_step : 0);
      const double lr = schedule->at(std::max<std::int64_t>(0, global_step - 1));
      const double sps = st.global_samples / std::max(1e-9, st.seconds);
      write(epoch, "train", st.totals, sps, lr, st.seconds, &st);
      if (metrics && opt.histograms_every_epochs > 0 && (epoch + 1) % opt.histograms_every_epochs == 0) {
        metrics->write_histograms(weight_histograms(backend(), parts.model->parameters()), global_step);
      }
      result.final_train_loss = st.totals.loss();
      result.final_train_accuracy = st.totals.accuracy();
      std::string line = fmt::format("epoch {:>3}/{}  train loss {:.4f} acc {:.4f}", epoch + 1, opt.epochs,
                                     st.totals.loss(), st.totals.accuracy());
      EpochMetrics watched{st.totals.loss(), st.totals.accuracy(), std::nullopt, std::nullopt, std::nullopt};
      const bool last = epoch + 1 == opt.epochs;
      // Early stopping on a training metric decides before the evaluation, so that the epoch a
      // run stops after is evaluated whatever eval_every_epochs says (its "final test accuracy").
      bool stop = early_stop && !early_stop->metric().needs_eval() && early_stop->update(epoch, watched);
      const bool evaluated = stop || evaluates_after(epoch);
      if (eval_loader && evaluated) {
        const SplitTotals ev = evaluate_and_record(epoch, EvalOf::model, lr, line);
        result.final_eval_loss = ev.loss();
        result.final_eval_accuracy = ev.accuracy();
        watched.eval_loss = ev.loss();
        watched.eval_accuracy = ev.accuracy();
        watched.eval_accuracy_top5 = ev.top_k_accuracy();
        result.final_eval_accuracy_top5 = ev.top_k_accuracy();
      }
      if (evaluates_averages() && evaluated) {
        const SplitTotals av = evaluate_and_record(epoch, EvalOf::average, lr, line);
        watched.eval_ema_loss = av.loss();
        watched.eval_ema_accuracy = av.accuracy();
        watched.eval_ema_accuracy_top5 = av.top_k_accuracy();
        result.final_ema_eval = av;
      }
      line += fmt::format("  |  {} samples/s  {:.2f}s  lr {:.3g}", io::format_si(sps), st.seconds, lr);
      if (st.skipped) line += fmt::format("  skipped {}", st.skipped);
      progress.line(line);
      log->debug("{}", line);
      // Every rank holds the same reduced metrics, so every rank decides the same. A rule watching
      // an eval metric reads it only where there is one (run.eval_every_epochs), as Keras' callbacks
      // skip epochs without validation: its patience counts evaluations.
      if (early_stop && early_stop->metric().needs_eval() && evaluated) stop = early_stop->update(epoch, watched);
      // Before this epoch's checkpoint, which must hold the rate the next epoch trains at.
      const LrPlateau* plateau = schedule->plateau();
      if (plateau == nullptr || evaluated || !plateau->metric().needs_eval()) {
        if (const auto reduced = schedule->end_epoch(epoch, watched)) log->info("epoch {}: {}", epoch + 1, *reduced);
      }
      // An early stop writes the checkpoint of the epoch it stops after, like the last epoch's.
      const bool checkpointing = opt.checkpoint_every > 0 || opt.checkpoint_every_steps > 0;
      if (checkpoints->epoch_checkpoint_due(epoch, last, stop && checkpointing)) save_rotating(position(epoch + 1, 0));
      const std::optional<WatchedMetric>& best_metric = checkpoints->options().keep_best;
      if (best_metric && (evaluated || !best_metric->needs_eval()) && checkpoints->offer_best(watched)) {
        buffer_sync->from_rank0();  // the saved statistics are the ones every rank used
        stop_if_weights_diverged(checkpoints->best_dir());
        save_checkpoint_to(checkpoints->best_dir(), backend(), *parts.comm, *parts.model, *optimizer, *parts.precision,
                           position(epoch + 1, 0), ema.get(), checkpoints->best_metadata(epoch));
      }
      if (opt.on_epoch_end) opt.on_epoch_end(epoch + 1, global_step);
      if (stop) {
        result.stopped_early = fmt::format("{}; stopped after epoch {} of {}", early_stop->reason(), epoch + 1,
                                           opt.epochs);
        log->debug("{}", result.stopped_early);  // run.cpp says it on the console, once
        break;
      }
    }
    result.steps = global_step;
    return result;
  }
};

Trainer::Trainer(RunParts parts, TrainerOptions options, const RankInfo& ranks, io::MetricsWriter* metrics)
    : impl_(std::make_unique<Impl>(std::move(parts), std::move(options), ranks, metrics)) {
  impl_->build();
}

Trainer::~Trainer() = default;

TrainResult Trainer::run() { return impl_->run(); }

}  // namespace kiln::train
