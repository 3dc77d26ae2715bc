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
// run.cpp, which knows the config, builds it; the trainer carries it (TrainerOptions::run_identity)
// into each checkpoint's TrainerState, and save_checkpoint writes it as "run.<item>" metadata.
#pragma once

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

}  // namespace kiln::train
