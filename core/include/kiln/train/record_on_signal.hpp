// Writes the collective record (collective_recorder.hpp) when SIGTERM or SIGINT ends the rank.
//
// These are how a job is stopped from outside: the `--nproc` supervisor sends SIGTERM to the
// other ranks when one fails, mpirun and Slurm do the same, and Ctrl-C on a hung job sends
// SIGINT. The ranks still alive at that moment are the ones whose record says who was waiting
// for whom, so they must write it before they go.
//
// While an instance lives, the handler only writes the signal's number into a pipe (all a
// handler may safely do). A thread of its own reads it, writes the record with ordinary code,
// then restores the default action and re-sends the signal, so the process ends exactly as it
// would have (killed by that signal) a few milliseconds later. The supervisor's SIGKILL after
// its grace period bounds a write that hangs. A signal that was ignored when the instance was
// made stays ignored. One instance at a time (the handler reaches it through a global).
#pragma once

#include <signal.h>

#include <memory>
#include <thread>

namespace kiln::train {

class CollectiveRecorder;

class RecordOnStopSignal {
 public:
  explicit RecordOnStopSignal(std::shared_ptr<CollectiveRecorder> recorder);
  /// Restores the previous handlers; a signal not yet acted on is then handled by those.
  ~RecordOnStopSignal();
  RecordOnStopSignal(const RecordOnStopSignal&) = delete;
  RecordOnStopSignal& operator=(const RecordOnStopSignal&) = delete;

 private:
  void watch();

  std::shared_ptr<CollectiveRecorder> recorder_;
  int pipe_[2] = {-1, -1};
  struct sigaction old_term_ {}, old_int_ {};
  bool installed_term_ = false, installed_int_ = false;
  std::thread watcher_;
};

}  // namespace kiln::train
