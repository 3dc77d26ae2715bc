// Trainer: the epoch loop of synchronous data-parallel training.
//
// Per step: batch -> device -> PrecisionPolicy::before_forward -> input cast to the compute dtype
// -> Model::forward -> logits cast to f32 -> softmax cross-entropy -> dlogits scaled by
// loss_scale / (global rows this step) -> dlogits cast to the compute dtype -> Model::backward with
// GradSync reducing buckets as they complete -> PrecisionPolicy::after_allreduce -> optimizer
// step (unless skipped) -> zero gradients -> [ema]'s moving average updated (weight_ema.hpp).
// After each epoch: rank 0's batch-norm statistics to every rank (bn_sync.hpp; again before a
// checkpoint), evaluation on the eval split (and with [ema] again with the averaged weights),
// then one metrics.jsonl record per split whose numbers are reduced over all ranks, weighted by
// sample count. Every rank runs the same number of steps (the Sharder guarantees it), so
// collectives always match. The casts are a ComputeBoundary's (compute_boundary.hpp); under fp32
// there are none.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/data/data_loader.hpp"
#include "kiln/data_source.hpp"
#include "kiln/io/metrics_writer.hpp"
#include "kiln/io/progress.hpp"
#include "kiln/model.hpp"
#include "kiln/train/run_identity.hpp"
#include "kiln/precision_policy.hpp"
#include "kiln/train/freeze.hpp"
#include "kiln/train/init_weights.hpp"
#include "kiln/train/dry_run.hpp"
#include "kiln/train/early_stop.hpp"
#include "kiln/train/lr_schedule.hpp"
#include "kiln/train/evaluate.hpp"
#include "kiln/train/optimizer.hpp"
#include "kiln/train/weight_ema.hpp"

namespace kiln::train {

/// The plugin objects of one run. The backend must outlive everything else (members are
/// destroyed in reverse order, so it is declared first).
struct RunParts {
  std::shared_ptr<Backend> backend;
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<PrecisionPolicy> precision;
  std::shared_ptr<Model> model;
  std::shared_ptr<DataSource> train_data;
  std::shared_ptr<DataSource> eval_data;  // may be null: no evaluation
};

struct TrainerOptions {
  std::int64_t epochs = 1;
  std::uint64_t seed = 0;
  float label_smoothing = 0;
  std::int64_t bucket_bytes = 25'000'000;
  data::LoaderOptions train_loader;
  data::LoaderOptions eval_loader;
  std::string optimizer_type;
  ParamMap optimizer_table;
  std::string schedule_type;
  ParamMap schedule_table;
  io::Progress::Mode progress = io::Progress::Mode::automatic;
  /// Off a terminal: a plain progress line when nothing was printed for this long (0 = every step).
  double progress_every_s = 30;
  /// A "train_step" metrics record every N optimizer steps (step_metrics.hpp); 0 = none.
  std::int64_t metrics_every_steps = 0;
  /// A TensorBoard histogram of every parameter after every N epochs (weight_histograms.hpp); 0 = none.
  std::int64_t histograms_every_epochs = 0;
  /// [run] eval_every_epochs: evaluate after every N epochs, after the last, and after the one
  /// early stopping ends the run with.
  std::int64_t eval_every_epochs = 1;
  /// Called after every epoch of a real run, its checkpoint written: (epochs done, optimizer
  /// steps done). run.cpp keeps <run_dir>/status.json current with it (run_status.hpp).
  std::function<void(std::int64_t, std::int64_t)> on_epoch_end;
  /// Checkpoints: written under checkpoint_dir every `checkpoint_every` epochs and after the
  /// last (0 = never), newest `checkpoint_keep` kept. `resume_from` (a checkpoint directory)
  /// restores weights, optimizer, precision state and the position before training starts.
  std::filesystem::path checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  std::int64_t checkpoint_keep = 3;
  std::filesystem::path resume_from;
  /// Fine-tuning ([model] init, init_weights.hpp): when `load_init` (every rank; false when
  /// resuming), rank 0 loads `init` (set on rank 0 only) after the model is built and before
  /// rank 0's parameters are broadcast.
  bool load_init = false;
  std::shared_ptr<const InitWeights> init;
  /// Frozen parameters ([model] freeze, freeze.hpp): matched against the model once it is built.
  std::optional<FreezeRequest> freeze;
  /// Synchronised batch-norm (sync_batch_norm.hpp): set when [model] sync_bn = true, holding
  /// where it was set (for the error when the model has no batch-norm layer).
  std::optional<std::string> sync_bn;
  /// What this run is (run_identity.hpp), written into every checkpoint so a resume can check it.
  RunIdentity run_identity;
  /// The training data's class names (class_names.hpp), written into every checkpoint.
  std::vector<std::string> class_names;
  /// Stop with a NumericError when the training loss becomes inf or nan (loss_guard.hpp).
  bool stop_on_nonfinite_loss = true;
  /// Optimizer steps between those checks; each reads the loss back to the host (a device sync).
  std::int64_t loss_check_every = 1;
  /// Before training, gather every rank's samples of two epochs and check them (shard_check.hpp).
  bool check_sharding = false;
  /// Called at the start of each optimizer step (once the batch of its first micro-step is in
  /// hand) and at its end (after the optimizer), once per group with loader.accumulate_steps;
  /// empty: none. kiln train --profile times steps with them (profile/).
  std::function<void()> on_step_begin, on_step_end;
  /// Gradient clipping by global norm after the all-reduce and unscaling (grad_clip.hpp); 0 = off.
  double clip_grad_norm = 0;
  /// Micro-batches per optimizer step (accumulation.hpp); 1 = no accumulation.
  std::int64_t accumulate_steps = 1;
  /// Also checkpoint every N optimizer steps, mid-epoch too (checkpoint_policy.hpp); 0 = never.
  std::int64_t checkpoint_every_steps = 0;
  /// Keep the best checkpoint by this metric in checkpoint_dir/best; empty = off.
  std::optional<WatchedMetric> keep_best;
  /// Stop when a metric stops improving (early_stop.hpp); empty = off.
  std::optional<EarlyStopOptions> early_stop;
  /// The plateau schedule's rule (lr_plateau.hpp): set when schedule_type is "plateau".
  std::optional<PlateauOptions> lr_plateau;
  /// A moving average of the weights (weight_ema.hpp); empty = off.
  std::optional<EmaOptions> ema;
  /// `kiln train --dry-run`: run only this many optimizer steps of the first epoch (each timed,
  /// the device synchronised after it) and as many eval batches, then stop: no epoch records, no
  /// checkpoints (dry_run.hpp). 0 = a real run.
  std::int64_t dry_run_steps = 0;
  /// A dry run also writes one checkpoint, into checkpoint_dir/dry-run (never rotated, never
  /// resumed from; removed with what the dry run added), where the real run would write any.
  bool dry_run_checkpoint = false;
};

/// The metrics `o` watches: early stopping's, keep_best's and the plateau schedule's, where set.
std::vector<const WatchedMetric*> watched_metrics(const TrainerOptions& o);

/// What the run achieved, for the CLI and tests.
struct TrainResult {
  double final_train_loss = 0, final_train_accuracy = 0;
  double final_eval_loss = 0, final_eval_accuracy = 0;
  std::optional<double> final_eval_accuracy_top5;  ///< where the run counts top-5
  /// The averaged weights' evaluation after the last epoch ([ema] with evaluate = true).
  std::optional<EvalSums> final_ema_eval;
  std::int64_t steps = 0;
  /// Why the run ended before its last epoch ("early stopping: ..."); empty when it did not.
  std::string stopped_early;
  /// Why a resumed run trained nothing (its checkpoint is at or past run.epochs, or is where early
  /// stopping ended the run); empty when it trained.
  std::string nothing_to_train;
  /// What a dry run measured (TrainerOptions::dry_run_steps); empty for a real run.
  std::optional<DryRunReport> dry_run;
};

class Trainer {
 public:
  /// Builds the model and loaders; broadcasts rank 0's initial parameters and verifies them.
  /// `metrics` may be null on ranks other than 0.
  Trainer(RunParts parts, TrainerOptions options, const RankInfo& ranks, io::MetricsWriter* metrics);
  ~Trainer();
  TrainResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::train
