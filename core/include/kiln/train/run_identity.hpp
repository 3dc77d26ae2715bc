// What a run is, recorded in every checkpoint, so that a resume cannot silently continue another
// run's weights (a different model, world size, batch or data turns the restored position and
// optimizer state into nonsense, which used to train on, sometimes to NaN, with exit 0).
//
// The rule: everything recorded here must match on resume, unless `--resume-ignore-config` says
// the change is intended. Recorded: the model's type and every resolved model parameter (its
// shape, and what its weights mean), the seed (data order, dropout), the per-rank batch, the world
// size, the sample count of each data split and the precision type. Not recorded, so free to
// change: the optimizer and its lr, the schedule, epochs, checkpoint and log settings.
//
// The identity travels from run.cpp (which knows the config) to save_checkpoint (called from the
// trainer's loop) through a table keyed by the checkpoint directory, so the trainer, which has no
// use for it, does not have to carry it.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kiln/params.hpp"

namespace kiln::train {

/// "model.type" -> "mlp", "model.hidden" -> "[128]", "world_size" -> "2", ...
using RunIdentity = std::map<std::string, std::string>;

/// A parameter value as TOML-like text: 3, 0.5, true, "text", [128, 64].
std::string param_text(const ParamValue& value);

/// Adds every entry of `table` as "<prefix>.<key>".
void add_params(RunIdentity& id, const std::string& prefix, const ParamMap& table);

/// One line per item that differs: "checkpoint was written with model.hidden = [128], this run has
/// [256]"; an item only one side has reads "none" on the other. Empty when they agree.
std::vector<std::string> identity_differences(const RunIdentity& checkpoint, const RunIdentity& current);

/// Makes save_checkpoint record `id` in every checkpoint written under `checkpoint_dir` by this
/// process (replacing what was set before for that directory).
void set_run_identity(const std::filesystem::path& checkpoint_dir, RunIdentity id);

/// What set_run_identity recorded for `checkpoint_dir`; empty if nothing (tests that drive the
/// trainer directly), and then the checkpoint carries no identity and a resume cannot check it.
RunIdentity run_identity_for(const std::filesystem::path& checkpoint_dir);

}  // namespace kiln::train
