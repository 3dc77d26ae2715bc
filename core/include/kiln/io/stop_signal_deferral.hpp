// Holding back SIGTERM and SIGINT while a failed start could still need undoing.
//
// Between creating the run directory and committing the start, rank 0 may have to remove what
// the start wrote (run_dir_rollback.hpp). Under `--nproc`, when another rank fails first, the
// supervisor sends rank 0 SIGTERM at once; with the default disposition rank 0 died mid-start
// and the new run directory stayed behind. While a StopSignalDeferral lives, SIGTERM and SIGINT
// are only recorded (a process-wide handler, so whichever thread receives them); when it ends:
//  - normally (the start was committed): the dispositions are restored and a recorded signal is
//    raised again, so the process stops exactly as it would have, only a little later;
//  - during stack unwinding (the start failed; the rollback, destroyed first, has run): the
//    dispositions are restored and the signal is dropped, so the rank exits with its own error
//    message rather than a bare "killed by SIGTERM" -- it was stopping anyway.
// A signal that was ignored when the deferral began (nohup, a shell's background job) stays
// ignored. A rank stuck in a collective is not helped: it sees the signal only when the call
// returns, and the supervisor's SIGKILL after its grace period ends it as before.
#pragma once

#include <csignal>

namespace kiln::io {

class StopSignalDeferral {
 public:
  StopSignalDeferral();
  ~StopSignalDeferral();
  StopSignalDeferral(const StopSignalDeferral&) = delete;
  StopSignalDeferral& operator=(const StopSignalDeferral&) = delete;

  /// The first deferred signal so far (SIGTERM or SIGINT), or 0.
  static int pending() noexcept;

 private:
  struct sigaction old_term_{};
  struct sigaction old_int_{};
  bool installed_term_ = false;
  bool installed_int_ = false;
  int uncaught_at_start_ = 0;
};

}  // namespace kiln::io
