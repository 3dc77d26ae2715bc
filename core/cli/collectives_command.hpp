// `kiln collectives --run-dir DIR`: which rank the others waited for, from the records the ranks
// of a multi-rank run wrote when it stopped abnormally (kiln/train/collective_report.hpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Parses the arguments after "collectives" and prints the report to `out`. Returns the exit
/// code; throws kiln::Error (no record) and boost::program_options errors for main() to report.
int run_collectives_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace kiln::cli
