// Opening one candidate plugin file safely (private to core/plugin).
//
// Nothing in a file is executed before it passes: trusted path (path_trust.hpp: owner root or
// the user, no group/other write, along the whole written and resolved path), an ELF whose
// "kilnplug" section exports the descriptor symbol (boost::dll::library_info reads the file
// without loading it), and a load in a throw-away child that the library's initialisers do not
// end (load_probe.hpp). Then it is loaded with RTLD_NOW | RTLD_LOCAL, so an unresolved
// symbol fails here rather than mid-training, and the handle is leaked into a process-wide list:
// libraries are never unloaded.
#pragma once

#include <filesystem>

namespace kiln::plugin {

/// Throws PluginError naming `dir`, the component at fault and the fix if the directory's path
/// is not trusted (path_trust.hpp).
void check_directory_trusted(const std::filesystem::path& dir);

/// Runs every check above on `library` and loads it; returns the address the exported
/// descriptor alias points to (a `const kiln_library_v1*`, not yet validated).
/// Throws PluginError with one sentence naming the file.
const void* load_plugin_library(const std::filesystem::path& library);

}  // namespace kiln::plugin
