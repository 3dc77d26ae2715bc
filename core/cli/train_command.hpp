// `kiln train`: command-line options -> kiln::train::run_training, or, with --nproc N, the
// supervisor that starts N ranks of this same command (kiln::launch::supervise).
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

/// Parses the arguments after "train" and runs the job. Returns the exit code; throws
/// kiln::Error and boost::program_options errors for main() to report.
int run_train_command(const std::vector<std::string>& args);

}  // namespace kiln::cli
