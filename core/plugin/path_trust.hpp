// Whether a plugin directory or library could be changed by someone other than the user (private
// to core/plugin). The policy is the one ld.so, sudo's secure_path and OpenSSH's StrictModes
// apply: every directory on the way to the file, and the file, must be
//   - owned by root or by the effective user, and
//   - not writable by group or others, unless it is a directory with the sticky bit owned by
//     root (like /tmp: others may add entries but not rename or replace ours), or only
//     group-writable and its group is the owner's private group (private_group.hpp: the umask
//     002 of Ubuntu users makes every folder so, and no one else is in the group).
// Both the path as written (each symlink's directory) and the path it resolves to are checked.
// One exception: a directory that also contains the running executable is accepted whatever
// its owner and mode, since whoever can change it could already replace kiln itself; this keeps
// a build tree working in a checkout below a shared or group-writable directory.
#pragma once

#include <filesystem>
#include <string_view>

namespace kiln::plugin {

/// Throws PluginError naming `path`, the offending component, why, and the fix. `what` is
/// "plugin directory" or "plugin library". A symlink loop or a missing component is reported
/// as such. `path` must be absolute.
void check_path_trusted(const std::filesystem::path& path, std::string_view what);

}  // namespace kiln::plugin
