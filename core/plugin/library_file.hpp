// Opening one candidate plugin file safely (private to core/plugin).
//
// Nothing in a file is executed before it passes: not world-writable (file and directory),
// an ELF whose "kilnplug" section exports the descriptor symbol (boost::dll::library_info reads
// the file without loading it). Then it is loaded with RTLD_NOW | RTLD_LOCAL, so an unresolved
// symbol fails here rather than mid-training, and the handle is leaked into a process-wide list:
// libraries are never unloaded.
#pragma once

#include <filesystem>

namespace kiln::plugin {

/// Throws PluginError naming `dir` and `chmod o-w` if the directory is world-writable.
void check_directory_trusted(const std::filesystem::path& dir);

/// Runs every check above on `library` and loads it; returns the address the exported
/// descriptor alias points to (a `const kiln_library_v1*`, not yet validated).
/// Throws PluginError with one sentence naming the file.
const void* load_plugin_library(const std::filesystem::path& library);

}  // namespace kiln::plugin
