// Editing a command's arguments before a supervisor passes them on to the processes it starts
// (`kiln train --nproc`, `kiln bench-comm --nproc`): the options only the supervisor takes come out.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

/// `args` without every "--NAME VALUE" and "--NAME=VALUE" (option abbreviations are off in every
/// command, so these are the only spellings).
std::vector<std::string> without_option(const std::vector<std::string>& args, const std::string& name);

}  // namespace kiln::cli
