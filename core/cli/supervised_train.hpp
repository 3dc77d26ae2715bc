// `kiln train --nproc N [--max-restarts K]`: the supervisor side of `kiln train`.
//
// It resolves the run directory (--run-dir, else run.run_dir, else runs/<timestamp>) from the
// config without loading any plugin, leaves its creation to the ranks, creates a private
// rendezvous directory, and re-executes itself N times with the same arguments minus --nproc and
// --max-restarts, plus --run-dir (kiln::launch::supervise).
//
// With --max-restarts K (torchrun's option of the same name), a job whose rank failed -- a crash,
// the out-of-memory killer, a lost peer, a collective that timed out -- is started again, all N
// ranks, up to K times, each time with `--resume auto` from the newest intact checkpoint of the
// run directory. There is no restart without one (a restart would begin from nothing, in a run
// directory that is no longer fresh) nor after Ctrl-C or SIGTERM to the supervisor (someone
// stopped the job). Each failure is reported before its restart, as without restarts.
#pragma once

#include <string>
#include <vector>


namespace kiln::cli {

struct SupervisedTrain {
  std::vector<std::string> args;  ///< `kiln train`'s arguments, as given
  int nproc = 1;
  int max_restarts = 0;
  std::string config;
  std::vector<std::string> sets;
  std::string run_dir;  ///< --run-dir, or empty
  std::string resume;   ///< --resume, or empty
};

/// Runs the job (and its restarts) and returns the exit code: 0 once an attempt completes.
int run_supervised_train(const SupervisedTrain& job);

}  // namespace kiln::cli
