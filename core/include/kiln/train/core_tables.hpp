// Schemas of the config tables the core itself reads (plugin tables are described by their
// plugins): [run], [loader], [loss], [log], [dist]. [optimizer] and [schedule] live with their code
// (optimizer.hpp, lr_schedule.hpp). docs/configuration.md lists every key.
#pragma once

#include <span>

#include "kiln/plugin_abi.h"

namespace kiln::train {

std::span<const kiln_param_spec_v1> run_schema();
std::span<const kiln_param_spec_v1> loader_schema();
std::span<const kiln_param_spec_v1> loss_schema();
std::span<const kiln_param_spec_v1> log_schema();
std::span<const kiln_param_spec_v1> dist_schema();

}  // namespace kiln::train
