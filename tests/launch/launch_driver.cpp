// Runs kiln::launch::supervise on any program, so the supervisor can be tested with stand-in
// ranks (launch_child) in a process of its own (its signal mask and children stay out of the
// test runner). Prints what `kiln train --nproc` prints and exits with the same status.
//
//   launch_driver NPROC GRACE_MS RENDEZVOUS PROGRAM [ARGS...]     (RENDEZVOUS "-" for none)
// KILN_TEST_STALL_MS, if set, is the stall limit (kiln train passes dist.timeout_s).
#include <cstdlib>
#include <iostream>
#include <string>

#include "kiln/errors.hpp"
#include "kiln/launch/supervisor.hpp"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: launch_driver NPROC GRACE_MS RENDEZVOUS PROGRAM [ARGS...]\n";
    return 2;
  }
  kiln::launch::SuperviseOptions o;
  o.nproc = std::atoi(argv[1]);
  o.grace = std::chrono::milliseconds(std::atoi(argv[2]));
  o.rendezvous = std::string(argv[3]) == "-" ? "" : argv[3];
  o.program = argv[4];
  for (int i = 5; i < argc; ++i) o.args.emplace_back(argv[i]);
  if (const char* stall = std::getenv("KILN_TEST_STALL_MS")) o.stall_limit = std::chrono::milliseconds(std::atoi(stall));
  try {
    const kiln::launch::SuperviseOutcome r = kiln::launch::supervise(o);
    std::cout << "failed_rank=" << r.failed_rank << std::endl;
    if (r.exit_code != 0) std::cerr << "kiln: error: " << r.message << std::endl;
    return r.exit_code;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error: " << e.what() << std::endl;
    return 1;
  }
}
