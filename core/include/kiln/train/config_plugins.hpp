// Every plugin table of a training config, validated the one way `kiln train` validates them.
//
// Why one function: each command that reads a training config (train, eval, predict, bench-data,
// summary) must accept every config a run accepts, and refuse the same typos. When each picked
// its tables by itself they drifted: bench-data once left [early_stop] out, and validated [model]
// against the plugin's schema alone, refusing a fine-tuning config's `freeze`.
#pragma once

#include <optional>

#include "kiln/config/config.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/model_table.hpp"
#include "kiln/train/wiring.hpp"

namespace kiln::train {

struct ConfigPlugins {
  PluginChoice backend;            ///< [backend], default cpu
  ModelTable model;                ///< [model]: the plugin's keys and the host's (init, freeze, ...)
  PluginChoice train;              ///< [data.train], required
  std::optional<PluginChoice> eval;  ///< [data.eval], when the config has one
  PluginChoice comm;               ///< [comm], default local
  PluginChoice precision;          ///< [precision], default fp32
};

/// Picks and validates each plugin table (wiring.hpp's choose(), model_table.hpp's
/// choose_model()), then refuses anything the config holds that no table took
/// (Config::check_all_consumed). Throws ConfigError naming the file and line, PluginError for a
/// plugin the registry cannot provide.
ConfigPlugins choose_config_plugins(config::Config& cfg, const plugin::Registry& registry);

}  // namespace kiln::train
