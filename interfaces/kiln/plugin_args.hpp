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
  /// The run directory (may be empty for `kiln plugins` and tests). While the factory runs it
  /// holds nothing of this run yet (for a fresh run it is empty, or not made yet on ranks other
  /// than 0); `kiln train` writes into it only after every plugin has been constructed and
  /// checked, and a failed start removes what it made, so write into it from training calls only.
  std::string run_dir;
};

}  // namespace kiln
