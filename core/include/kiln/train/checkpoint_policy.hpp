// When the trainer writes checkpoints, and which one it keeps as the best ([checkpoint] table).
//
// Rotating checkpoints (checkpoints/epoch-NNNN[-step-SSSSSSSS], newest `keep` kept) are written
// after every `every_epochs`-th epoch and the last, and every `every_steps` optimizer steps. A
// step checkpoint that falls on an epoch's last step is written as that epoch's checkpoint
// instead (after its evaluation), so no position is saved twice. A checkpoint in the middle of an
// epoch records how many loader steps of the epoch are done; resuming from it continues with the
// next one (same data order, dropout masks, learning rate, optimizer and loss-scale state).
//
// The best checkpoint (keep_best = "<metric>", early_stop.hpp names the metrics) lives in
// checkpoints/best: after each epoch whose metric beats the best so far, the epoch's state is
// written there, with "best.metric", "best.mode", "best.value" and "best.epoch" in the metadata
// of both files. Its name does not start with "epoch-", so pruning never removes it and
// `--resume auto` never picks it (a resume continues from the newest position, not the best).
// A resumed run reads the best value back from checkpoints/best, so only a better epoch
// replaces it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "kiln/params.hpp"
#include "kiln/train/early_stop.hpp"

namespace kiln::train {

inline constexpr const char* kBestCheckpointName = "best";

struct CheckpointPolicyOptions {
  std::int64_t every_epochs = 0;  ///< 0 = no epoch checkpoints
  std::int64_t every_steps = 0;   ///< 0 = no step checkpoints
  std::int64_t keep = 3;
  std::optional<WatchedMetric> keep_best;
};

/// Reads and checks the validated [checkpoint] table (keys refused with where they were set);
/// `has_ema`: the run evaluates averaged weights, so keep_best may watch an eval_ema_* metric.
CheckpointPolicyOptions checkpoint_policy_options(const ParamMap& table, bool has_eval_split, bool has_ema = false);

class CheckpointPolicy {
 public:
  CheckpointPolicy(CheckpointPolicyOptions options, std::filesystem::path checkpoint_dir);

  /// After optimizer step `global_step` (counted from 1): a step checkpoint is due now. One due at
  /// the epoch's last step is not: it is remembered and written by epoch_checkpoint_due's caller.
  bool step_checkpoint_due(std::int64_t global_step, bool last_step_of_epoch);
  /// After epoch `epoch` (0-based): the rotating checkpoint is due (every_epochs; the run's last
  /// epoch `last` when either kind of checkpoint is on; a step checkpoint that fell on this
  /// epoch's last step; or `forced`).
  bool epoch_checkpoint_due(std::int64_t epoch, bool last, bool forced);

  /// True when `m` beats the best so far (and remembers it); false when keep_best is off.
  bool offer_best(const EpochMetrics& m);
  /// Metadata for the best checkpoint just offered.
  std::map<std::string, std::string> best_metadata(std::int64_t epoch) const;
  std::filesystem::path best_dir() const { return dir_ / kBestCheckpointName; }
  const CheckpointPolicyOptions& options() const noexcept { return opt_; }

 private:
  /// Reads the value of an existing checkpoints/best (a resumed run), if it watched the same metric.
  void load_existing_best();

  CheckpointPolicyOptions opt_;
  std::filesystem::path dir_;
  bool step_fell_on_epoch_end_ = false;
  std::optional<double> best_;
};

}  // namespace kiln::train
