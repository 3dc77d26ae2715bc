// `kiln train`: from a config file to a finished run.
//
// Order: resolve ranks -> parse and validate the whole config (every table, every plugin's
// parameters, unknown tables) -> choose the run directory without creating it -> create the
// plugins -> check that model and data agree (input shape, dtype, classes), that the
// communicator takes the backend's memory, that the precision suits the backend and that each
// loader has at least one step -> open the rendezvous store ([dist]) and connect the
// communicator -> create the run directory, write config.toml and attach the per-rank log ->
// print the banner -> build the trainer -> train. Config mistakes, rejected plugin parameters and
// mismatched plugins therefore fail before anything is written; should building the trainer
// fail (it needs the directory for metrics.jsonl), what the start wrote is removed again
// (io/run_dir_rollback.hpp), so a failed start leaves nothing behind. With more than one rank
// every rank uses the same run directory (--run-dir or run.run_dir is then required): rank 0
// writes config.toml and metrics.jsonl, every rank its logs/rank<N>.log.
//
// Errors: whatever a plugin's method throws reaches the caller as one kiln::Error naming the
// plugin, its library and the method (kiln/plugin/guarded.hpp, plugin_call.hpp).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kiln/launch/ranks.hpp"
#include "kiln/train/trainer.hpp"

namespace kiln::train {

struct TrainCommand {
  std::filesystem::path config;
  std::vector<std::string> overrides;                 ///< "--set key=value" texts
  std::string run_dir;                                ///< --run-dir (wins over run.run_dir)
  std::vector<std::filesystem::path> plugin_dirs;     ///< --plugin-path entries
  launch::ExplicitRanks ranks;
  /// --dump-params: after training rank 0 writes every parameter's master values here, raw
  /// little-endian f32 in parameter order, no header (for equivalence tests). Empty: none.
  std::filesystem::path dump_params;
  /// --resume: "" (a fresh run), "auto" (the newest complete checkpoint in the run directory's
  /// checkpoints/), "if-any" ("auto" when the run directory has a checkpoint, else a fresh run in
  /// it) or a checkpoint directory. Resuming appends to the run directory.
  std::string resume;
  /// --resume-ignore-config: resume even though the checkpoint was written by a run whose
  /// identity (run_identity.hpp: model, seed, batch, world size, data sizes, precision) differs.
  bool resume_ignore_config = false;
  /// --profile: time every backend op of the training steps after the first `profile_warmup`
  /// and print the per-op table when training ends (rank 0 also writes profile.txt and
  /// profile.json into the run directory). docs/profiling.md.
  bool profile = false;
  std::int64_t profile_warmup = 1;
  /// --check-sharding: before training, the ranks check their samples (shard_check.hpp).
  bool check_sharding = false;
  /// --dry-run / --dry-run-steps N: train this many optimizer steps and evaluate as many batches,
  /// print what a real run would take, and leave the run directory as it was (dry_run.hpp).
  /// 0 = a real run.
  std::int64_t dry_run_steps = 0;
};

struct RunOutcome {
  TrainResult result;
  std::filesystem::path run_dir;
};

/// Runs a training job. Throws kiln::Error subclasses with one-line messages.
RunOutcome run_training(const TrainCommand& command);

/// --resume as it applies to the run directory `run_dir` (--run-dir or run.run_dir): "if-any"
/// becomes "auto" where run_dir/checkpoints holds a complete checkpoint and "" (a fresh run)
/// where it does not; anything else is returned as it is. "if-any" without a run directory is a
/// ConfigError (a runs/<timestamp> default is new every time).
std::string effective_resume(const std::string& resume, const std::string& run_dir);

}  // namespace kiln::train
