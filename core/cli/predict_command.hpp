// `kiln predict`: a finished run's checkpoint applied to every sample of its eval split (or
// another data source given with --set), in the source's order, each sample once, written as
// CSV or JSON lines (prediction_file.hpp) with its top-k classes and softmax probabilities.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Parses the arguments after "predict", writes the file, prints a summary line to `out`.
/// Returns the exit code; throws kiln::Error and boost::program_options errors for main().
int run_predict_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace kiln::cli
