// `kiln summary --config F`: a config's model as a table of its parameters (and, on request, its
// buffers) with shapes, sizes, what trains, with what weight decay and, with [model] init, what
// each gets from the file; `--depth N` adds them up by
// the first N parts of their names (torchinfo's depth); `--json` for scripts. Nothing is read but
// the config and the plugins, nothing written (train/model_summary.hpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Runs `kiln summary <args...>`; writes the table (or JSON) to `out`. Throws ConfigError for a
/// bad config or flags, and what a run's start throws for a model that does not build.
int run_summary_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace kiln::cli
