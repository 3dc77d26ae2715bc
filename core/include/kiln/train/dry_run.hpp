// `kiln train --dry-run`: a config checked by running it -- every rank starts, meets, builds its
// model and loaders, trains a few optimizer steps of the first epoch, evaluates as many batches
// and writes one checkpoint, with every collective of a real step -- and then nothing of it is
// kept: the run
// directory is removed as a failed start's is (run_dir_rollback.hpp). Lightning's fast_dev_run,
// with an estimate of what the real run will take, so a model x data x communicator x precision
// combination can be tried in seconds before it is given hours.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::train {

/// What the trainer measured in a dry run.
struct DryRunReport {
  /// Each optimizer step's wall time, the wait for its data included, the device synchronised
  /// at its end (so an asynchronous backend's time is counted where it is spent).
  std::vector<double> step_seconds;
  std::int64_t steps_per_epoch = 0;  ///< optimizer steps in a whole epoch
  std::int64_t epoch = 1;            ///< the epoch the steps were taken from (1-based; later on --resume)
  std::int64_t epochs_left = 0;      ///< what a real run would train: run.epochs less those a checkpoint holds
  /// Of those, the epochs a real run evaluates after (run.eval_every_epochs); -1: every one.
  std::int64_t evals_left = -1;
  double train_loss = 0;             ///< over the dry run's samples, all ranks
  std::int64_t eval_batches = 0;     ///< evaluated (0: no [data.eval])
  std::int64_t eval_batches_per_epoch = 0;
  double eval_seconds = 0;  ///< the eval batches together, their result read back
  /// Passes over those batches: 2 where [ema] evaluates the averaged weights after the model's.
  std::int64_t eval_passes = 1;
  /// The one checkpoint a dry run writes (into checkpoints/dry-run, removed with the rest) where
  /// the real run would write any: how long it took, and its size on rank 0.
  std::optional<double> checkpoint_seconds;
  double checkpoint_mb = 0;
  std::optional<double> device_peak_mib;  ///< where the backend counts it (allocator_peak_mib)
};

/// The lines a dry run ends with: what ran and how long it took; what an epoch and the whole run
/// would take at the pace of the steps after the first (which makes plans, allocates and warms
/// the caches); the peak memory of this process (and of the device where counted).
std::vector<std::string> dry_run_summary(const DryRunReport& report, double host_peak_mb);

/// This process's peak resident memory so far, in MB (getrusage).
double host_peak_rss_mb();

}  // namespace kiln::train
