// Path parameters (KILN_PARAM_PATH): where a relative value is anchored.
//
// A config file names its data next to itself ("path = 'data'"), so a relative value means
// "relative to the file that says it", whatever the working directory of `kiln train`; a value
// typed on the command line (--set) or a schema default means what a shell user expects:
// relative to the working directory. The plugin then only ever sees absolute paths, and the
// resolved config.toml in the run directory reruns from anywhere.
#pragma once

#include <filesystem>
#include <string>

namespace kiln::config {

/// `value` made absolute against `base` (itself absolute) and lexically normalised; an absolute
/// value is returned as given and an empty one stays empty (it means "not set").
std::string anchor_path(const std::string& value, const std::filesystem::path& base);

/// The directory relative values of the config file `source` are anchored to: its folder, as an
/// absolute path (the working directory for a bare file name).
std::filesystem::path config_dir(const std::string& source);

}  // namespace kiln::config
