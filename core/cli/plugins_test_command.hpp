// `kiln plugins test FILE [--set key=value]...`: a plugin author's conformance run. The library
// goes through every check the loader makes (as `kiln plugins check`), then each plugin it
// exports is created from its schema's defaults (plus the --set values, written as in a config:
// `--set model.hidden=[32]`, `--set data.train.path=...`, `--set backend.threads=1`) and exercised
// against its contract: models, data sources, communicators and precision policies on the cpu
// backend (conformance.hpp, conformance_precision.hpp), a backend on itself
// (conformance_backend.hpp). One line per check, "ok", "-" (not run, and why) or "FAIL" with
// what is wrong; exit status 1 if any failed. `--timeout SECONDS` (communicators only, default
// 20) is the timeout the communicator checks give, the others scaled with it (CommCheckTimes in
// conformance.hpp).
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Returns the exit status (0: every check passed). Throws PluginError when the loader refuses
/// the file, ConfigError for a bad --set or a factory refusing its parameters, or a --timeout
/// that is not a number of seconds in [1, 3600] or is given for a library without a communicator.
int run_plugins_test(const std::filesystem::path& file, const std::vector<std::string>& sets,
                     const std::vector<std::filesystem::path>& plugin_path_dirs, std::ostream& out,
                     const std::optional<std::string>& timeout = std::nullopt);

}  // namespace kiln::cli
