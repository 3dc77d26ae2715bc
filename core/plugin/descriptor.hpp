// Validating a library's exported descriptor (private to core/plugin).
//
// The descriptor comes from code we did not build, so every field is checked before use:
// abi_major equal, abi_minor <= ours, struct_size covering every field we read (the struct is
// copied into a zero-filled host struct, OBS-style, so a smaller future-compatible struct reads
// as zeros), toolchain key equal, and per plugin: known kind, a name, create/destroy present,
// a well-formed parameter schema. Plugin entries are walked with the library's own struct_size
// as the array stride.
#pragma once

#include <filesystem>
#include <vector>

#include "kiln/plugin/registry.hpp"

namespace kiln::plugin {

/// Checks the descriptor `raw` (the address the exported alias points to) of `library` and
/// returns one PluginInfo per plugin it exports. Throws PluginError naming the file and both
/// values of whatever does not match.
std::vector<PluginInfo> read_descriptor(const void* raw, const std::filesystem::path& library);

}  // namespace kiln::plugin
