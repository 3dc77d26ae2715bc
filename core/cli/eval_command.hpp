// `kiln eval`: a finished run's checkpoint evaluated on its eval split (or another data source
// given with --set), printed as one line or, with --json, one JSON object (eval_session.hpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Parses the arguments after "eval", evaluates, prints to `out`. Returns the exit code; throws
/// kiln::Error and boost::program_options errors for main() to report.
int run_eval_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace kiln::cli
