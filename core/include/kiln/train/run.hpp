// `kiln train`: from a config file to a finished run.
//
// Order: resolve ranks -> parse and validate the whole config (every table, every plugin's
// parameters, unknown tables) -> create the run directory, write config.toml and attach the
// per-rank log -> create the plugins -> check that model and data agree (input shape, dtype,
// classes) -> connect the communicator -> print the banner -> train. Config mistakes therefore
// fail before anything is written.
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
};

struct RunOutcome {
  TrainResult result;
  std::filesystem::path run_dir;
};

/// Runs a training job. Throws kiln::Error subclasses with one-line messages.
RunOutcome run_training(const TrainCommand& command);

}  // namespace kiln::train
