// Checkpoints: everything needed to continue a run exactly where it stopped.
//
//   <run_dir>/checkpoints/epoch-0003/model.safetensors    parameters and buffers, PyTorch names
//                                                         (no wrapper prefixes), f32; as metadata
//                                                         the training data's class names
//   <run_dir>/checkpoints/epoch-0003/trainer.safetensors  optimizer state ("exp_avg.<name>", ...)
//                                                         and, as metadata, epoch, global step,
//                                                         optimizer steps, precision state, seed,
//                                                         and the run's identity ("run.<item>")
//   <run_dir>/checkpoints/epoch-0003/model_ema.safetensors  with [ema] only: the moving average
//                                                         of the parameters and buffers, named
//                                                         and laid out as in model.safetensors
// A checkpoint is written into "checkpoints/.partial-epoch-0003" and renamed when complete, so a
// directory named epoch-NNNN is always whole; only the newest `keep` are kept. Rank 0 writes
// while the others wait at a barrier, so no rank runs ahead into a collective. Resuming
// reproduces the uninterrupted run, at an epoch boundary or from a checkpoint written in the
// middle of an epoch ("epoch-0003-step-00000150", checkpoint_policy.hpp): the data order, dropout
// masks and learning rate are functions of (seed, epoch, step), all restored.
//
// Trust: every tensor carries a CRC-32C in its file's metadata (io/safetensors.hpp), verified on
// every load, and trainer.safetensors records the run's identity ("run.<item>" metadata,
// run_identity.hpp) so that run.cpp can refuse to resume a different run. Any damage (a checksum
// mismatch, a malformed header, nonsense metadata) is a DataError naming the file and ending in
// kDamagedHint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/model.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/precision_policy.hpp"
#include "kiln/train/optimizer.hpp"
#include "kiln/train/run_identity.hpp"
#include "kiln/train/weight_ema.hpp"

namespace kiln::train {

/// Keys of the [checkpoint] table: every_epochs (1; 0 = never), keep (3), every_steps (0 = never),
/// keep_best ("" = off) and keep_best_mode (checkpoint_policy.hpp reads them).
std::span<const kiln_param_spec_v1> checkpoint_schema();

/// Where the loop stands; saved with every checkpoint.
struct TrainerState {
  std::int64_t epochs_done = 0;
  /// Loader steps of epoch `epochs_done` already trained: 0 for a checkpoint written at an
  /// epoch's end, > 0 for one written in the middle of an epoch ([checkpoint] every_steps).
  std::int64_t epoch_steps_done = 0;
  std::int64_t global_step = 0;
  std::int64_t seed = 0;
  std::map<std::string, double> precision;
  RunIdentity run;  ///< read from a checkpoint; empty for one written before identities existed
  /// State of the loop's other helpers ("early_stop.best", ...), saved as "state.<key>".
  std::map<std::string, double> extra;
  /// The training data's class names (class_names.hpp), saved in model.safetensors' metadata so
  /// that the weights say what their outputs mean; empty when the source named none.
  std::vector<std::string> class_names;
};

/// The directory name of the rotating checkpoint for `state`: "epoch-0003" at the end of epoch
/// 3, "epoch-0003-step-00000150" for one written at global step 150 in the middle of epoch 4.
/// The numbers are padded (4 and 8 digits) but not limited: past epoch 9999 text order is not
/// the order written, so pruning and latest_checkpoint order by checkpoints_oldest_first().
std::string checkpoint_name(const TrainerState& state);

/// The checkpoint folders in `dir` (named as checkpoint_name() names them; other names are
/// left out), ordered by epoch and then step, oldest first; with `complete_only` only those
/// holding model.safetensors and trainer.safetensors.
std::vector<std::filesystem::path> checkpoints_oldest_first(const std::filesystem::path& dir, bool complete_only);

/// The file of a checkpoint that holds [ema]'s averaged weights (weight_ema.hpp).
inline constexpr const char* kAveragedModelFile = "model_ema.safetensors";

/// How every error about a damaged checkpoint ends.
inline constexpr const char* kDamagedHint =
    "the checkpoint is damaged; use an earlier one (kiln train --resume <dir>, kiln eval --checkpoint <dir>)";

/// Writes a checkpoint for `state.epochs_done` under `dir` (the run's checkpoints/ directory) and
/// prunes old ones. With `ema`, its averages go into model_ema.safetensors. Every rank calls it;
/// rank 0 writes. Throws IoError.
void save_checkpoint(const std::filesystem::path& dir, std::int64_t keep, Backend& backend, Communicator& comm,
                     const Model& model, Optimizer& optimizer, const PrecisionPolicy& precision,
                     const TrainerState& state, const WeightEma* ema = nullptr);

/// Writes a checkpoint into exactly `final_dir` (through a temporary name, replacing what was
/// there), with `extra_meta` added to the metadata of every file; prunes nothing. Every rank
/// calls it; rank 0 writes. Throws IoError.
void save_checkpoint_to(const std::filesystem::path& final_dir, Backend& backend, Communicator& comm,
                        const Model& model, Optimizer& optimizer, const PrecisionPolicy& precision,
                        const TrainerState& state, const WeightEma* ema = nullptr,
                        const std::map<std::string, std::string>& extra_meta = {});

/// The metadata of `checkpoint`'s trainer.safetensors, verified like inspect_checkpoint does.
std::map<std::string, std::string> checkpoint_metadata(const std::filesystem::path& checkpoint);

/// The newest complete checkpoint under `dir`, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

/// Reads the files of `checkpoint` (model_ema.safetensors too where there is one) and verifies
/// them (checksums, header, metadata) without a model; returns the saved state. Throws DataError
/// (damaged, naming the file) or IoError.
TrainerState inspect_checkpoint(const std::filesystem::path& checkpoint);

struct IntactCheckpoint {
  std::filesystem::path dir;
  TrainerState state;
};

/// The newest complete checkpoint under `dir` that inspect_checkpoint accepts; each newer one it
/// refuses is logged as a warning naming it and why (what `--resume auto` uses).
std::optional<IntactCheckpoint> latest_intact_checkpoint(const std::filesystem::path& dir);

/// Loads a checkpoint into a built model and an optimizer; returns the saved state (the caller
/// restores the precision policy from state.precision). Throws DataError when the checkpoint does
/// not match the model (missing or extra names, shapes), naming the tensor.
TrainerState load_checkpoint(const std::filesystem::path& checkpoint, Backend& backend, const Model& model,
                             Optimizer& optimizer);

/// Copies the averages of `checkpoint`'s model_ema.safetensors into `ema`; false (nothing copied)
/// when the checkpoint has none (written without [ema]). Throws DataError when the file is
/// damaged or does not fit the model, naming the file and the tensor.
bool load_averages(const std::filesystem::path& checkpoint, Backend& backend, const WeightEma& ema);

/// Copies the parameters and buffers of the model-format safetensors file `file` (a checkpoint's
/// model.safetensors or model_ema.safetensors) into `model`; every tensor of either side must
/// have its counterpart. Throws DataError naming the file and the tensor, IoError.
void load_model_weights(const std::filesystem::path& file, Backend& backend, const Model& model);

}  // namespace kiln::train
