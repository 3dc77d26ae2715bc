// This machine's name, for messages and records that say where a process ran.
#pragma once

#include <string>

namespace kiln::io {

/// gethostname(), or "?" where it fails.
std::string host_name();

}  // namespace kiln::io
