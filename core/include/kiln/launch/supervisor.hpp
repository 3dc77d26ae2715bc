// `kiln train --nproc N`: start N local ranks and watch them, like `torchrun --nproc-per-node`.
//
// The supervisor forks N children that exec the same program, each with the torchrun variables
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), KILN_RENDEZVOUS and OMP_NUM_THREADS (cores / N
// unless the user set it). It never loads plugins. When a child fails (non-zero exit or a signal)
// the others get SIGTERM, then SIGKILL after a grace period, and the outcome names the rank that
// failed first, with its pid and host. A rank the kernel reports stopped is warned about at once
// (ranks stopped together, or the whole job stopped with the supervisor by Ctrl-Z, in one line)
// and blamed if a peer fails while it is stopped (the peers time out waiting for it) or if it
// stays stopped past `stall_limit`. SIGINT/SIGTERM sent to the supervisor are forwarded.
// Children die with the supervisor (PR_SET_PDEATHSIG), so killing it leaves no rank behind.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/launch/ranks.hpp"

namespace kiln::launch {

struct SuperviseOptions {
  std::filesystem::path program;          ///< what every rank executes (kiln: /proc/self/exe)
  std::vector<std::string> args;          ///< argv[1..], identical for every rank
  int nproc = 1;                          ///< ranks to start, >= 1
  std::string rendezvous;                 ///< KILN_RENDEZVOUS for the children; empty: not set
  std::chrono::milliseconds grace{5000};  ///< between SIGTERM and SIGKILL when stopping ranks
  /// A rank stopped (SIGSTOP, SIGTSTP, a debugger) for longer than this fails the job, naming
  /// it; `kiln train` passes dist.timeout_s. Unset: a stopped rank is blamed only once a peer fails.
  std::optional<std::chrono::milliseconds> stall_limit;
};

/// How the job ended.
struct SuperviseOutcome {
  int exit_code = 0;    ///< 0: every rank exited 0; 1: a rank failed; 128 + signal: interrupted
  int failed_rank = -1; ///< the rank reported in `message`, -1 if none
  std::string message;  ///< one line without the "kiln: error: " prefix; empty on success
};

/// Runs the ranks to completion. Throws IoError if a child cannot be started (the ones already
/// started are stopped first). Not re-entrant: it blocks SIGCHLD/SIGINT/SIGTERM/SIGCONT while it runs.
SuperviseOutcome supervise(const SuperviseOptions& options);

/// The variables set for `rank` on top of the supervisor's environment (exposed for tests).
/// OMP_NUM_THREADS = max(1, cores / nproc) is included only when `env` has none.
std::map<std::string, std::string> rank_environment(int rank, int nproc, int cores, const std::string& rendezvous,
                                                    const EnvLookup& env = process_env());

/// CPUs this process may run on (sched_getaffinity), at least 1.
int usable_cores();

/// "SIGKILL" for 9; "signal 42" for a number without a name.
std::string signal_name(int signo);

}  // namespace kiln::launch
