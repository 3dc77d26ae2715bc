// `kiln runs [DIR]`: the run directories under DIR (default runs/) in one table -- how each stands
// (status.json, kiln/io/run_status.hpp), its epochs, final test accuracy, model and data, and why
// it ended -- so a folder of experiments reads at a glance, as a sweep tool's run list does.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Parses the arguments after "runs" and prints the table (or --json) to `out`. Returns the exit
/// code; throws kiln::Error for a DIR that is not a directory.
int run_runs_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace kiln::cli
