// `kiln plugins`: what plugins this kiln can see, and what each one accepts.
//
//   kiln plugins [list] [--json]   table of usable plugins, then libraries that failed and why
//   kiln plugins show NAME         one plugin in detail, gst-inspect style: kind, versions,
//                                  library, and every parameter with type, default and doc
//   kiln plugins check FILE        one library file, whatever its name or directory: every check
//                                  the loader makes (exit 1 with the reason if one fails), what
//                                  it exports, and whether a run would find and use it
//   kiln plugins test FILE         check, then its model and data plugins against their contract
//                                  (plugins_test_command.hpp)
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Runs `kiln plugins <args...>` (`args` are the words after "plugins") over the search path
/// built from `plugin_path_dirs` (--plugin-path), KILN_PLUGIN_PATH and the install dir, writing
/// to `out`. Returns the exit code (0; `check --json` of a library that fails: 1). Throws
/// PluginError for an unknown NAME (with a did-you-mean) or a library `check` refuses, and
/// ConfigError for a malformed command line.
int run_plugins_command(const std::vector<std::string>& args,
                        const std::vector<std::filesystem::path>& plugin_path_dirs, std::ostream& out);

}  // namespace kiln::cli
