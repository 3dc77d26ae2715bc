// `kiln bench-data --config F`: runs only the input pipeline of a training config -- the
// [data.train] source, its transforms, the loader's workers and prefetch -- and reports how fast
// it delivers samples, like tf.data's benchmarks: samples per second of wall time and samples per
// CPU-second (all of the process's threads), the figure that says what the pipeline costs the
// machine. No model runs and nothing is written. docs/benchmarks.md shows its use.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Runs `kiln bench-data <args...>`; writes the result (a line, or JSON with --json) to `out`.
/// Throws ConfigError for a bad config or flags, plugin errors as `kiln train` reports them.
int run_bench_data_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace kiln::cli
