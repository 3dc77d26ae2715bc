// A stand-in for `kiln bench-comm` in the tests: the same entry point behind a two-word command
// line ("bench-comm ..."), so --nproc can re-execute it through the supervisor exactly as it
// re-executes kiln, before the lead wires the subcommand into core/cli/main.cpp.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/bench_comm_command.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk_internal/log_setup.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] != "bench-comm") {
    std::fprintf(stderr, "usage: %s bench-comm [options]\n", argv[0]);
    return 2;
  }
  args.erase(args.begin());
  try {
    return kiln::cli::run_bench_comm_command(args, {}, std::cout);
  } catch (const kiln::Error& e) {
    kiln::log::flush();
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 2;
  }
}
