// `kiln config schema`: a JSON Schema of the training config, for editors and linters, like
// `fluent-bit -J`. Every table the core reads and, for each plugin table ([backend], [model],
// [data.train], [data.eval], [comm], [precision]), one variant per plugin on the search path
// (selected by its `type`), each key with its type, default, description, choices and range.
//
// Written as JSON Schema draft-04, the newest draft Taplo (the TOML language server behind VS
// Code's "Even Better TOML") reads: variants are `anyOf` branches matched on `type` (no `const`,
// no `if`/`then`), exclusive bounds are the draft-04 booleans. A table's unknown keys are refused
// (`additionalProperties: false`), as `kiln train` refuses them. What the schema cannot say (a
// key valid only with another, a file that must exist) `kiln train` still checks.
#pragma once

#include <filesystem>
#include <ostream>
#include <vector>

namespace kiln::cli {

/// Runs `kiln config <args...>` (only `schema` for now) over the plugins of the search path built
/// from `plugin_path_dirs`; returns the exit status. Throws ConfigError for a bad command line.
int run_config_command(const std::vector<std::string>& args,
                       const std::vector<std::filesystem::path>& plugin_path_dirs, std::ostream& out);

}  // namespace kiln::cli
