// PluginArgs: what every plugin factory receives (the `args` of kiln_plugin_v1::create).
#pragma once

#include <string>

#include "kiln/communicator.hpp"
#include "kiln/params.hpp"

namespace kiln {

struct PluginArgs {
  /// The plugin's validated config table (everything but `type`).
  const ParamMap* params = nullptr;
  /// This process's place in the world (backends pick a device and thread count from it).
  RankInfo ranks;
  /// The run directory (may be empty for `kiln plugins` and tests). It does not exist yet while
  /// the factory runs: `kiln train` creates it only after every plugin has been constructed and
  /// checked, so a failed start leaves nothing behind. Write into it from training calls only.
  std::string run_dir;
};

}  // namespace kiln
