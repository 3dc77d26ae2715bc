// Schemas of the config tables the core itself reads (plugin tables are described by their
// plugins): [run], [loader], [loss], [log], [dist]. [checkpoint], [early_stop], [optimizer],
// [schedule] and [ema] live with their code (checkpoint.hpp, early_stop.hpp, optimizer.hpp,
// lr_schedule.hpp, weight_ema.hpp); validate_core_tables() checks them all.
// docs/configuration.md lists every key.
#pragma once

#include <span>
#include <string>

#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::config {
class Config;
}

namespace kiln::train {

std::span<const kiln_param_spec_v1> run_schema();
std::span<const kiln_param_spec_v1> loader_schema();
std::span<const kiln_param_spec_v1> loss_schema();
std::span<const kiln_param_spec_v1> log_schema();
std::span<const kiln_param_spec_v1> dist_schema();

/// Every table the core reads itself, validated with its defaults filled in.
struct CoreTables {
  ParamMap run, loader, loss, log, dist, checkpoint, early_stop, ema;
  std::string optimizer_type;  ///< "sgd", "adam" (the default) or "adamw"
  ParamMap optimizer;
  std::string schedule_type;  ///< "constant" (the default), "cosine", "step", "plateau" or "polynomial"
  ParamMap schedule;
};

/// Validates [run], [loader], [loss], [log], [dist], [checkpoint], [early_stop], [optimizer],
/// [schedule] and [ema] as `kiln train` does. Every command that reads a training config (train, eval,
/// predict, bench-data, summary) calls this, whatever it uses, so that a table valid for training is
/// never "unknown" to another command. Throws ConfigError.
CoreTables validate_core_tables(config::Config& cfg);

}  // namespace kiln::train
