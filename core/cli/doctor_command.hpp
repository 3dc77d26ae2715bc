// `kiln doctor --comm NAME`: does a communicator work on this machine, and if not, why?
// It runs `kiln bench-comm` on a few small sizes with the results checked and a short timeout, in
// a child process it stops at its own deadline, and reports what comm_doctor.hpp concludes
// (docs/bench-comm.md#kiln-doctor).
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Parses the arguments after "doctor", runs the check and prints the diagnosis to `out`.
/// Returns 0 when the communicator worked, 1 when it did not; throws for bad usage.
int run_doctor_command(const std::vector<std::string>& args, const std::vector<std::filesystem::path>& plugin_dirs,
                       std::ostream& out);

}  // namespace kiln::cli
