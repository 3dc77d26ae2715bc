// Writes what a rank must leave behind when SIGTERM or SIGINT ends it: the collective record
// (collective_recorder.hpp) of a multi-rank run, rank 0's status.json ("interrupted",
// run_status.hpp).
//
// These are how a job is stopped from outside: the `--nproc` supervisor sends SIGTERM to the
// other ranks when one fails, mpirun and Slurm do the same, and Ctrl-C on a hung job (or on any
// run) sends SIGINT. The ranks still alive at that moment are the ones whose record says who was
// waiting for whom, so they must write it before they go.
//
// While an instance lives, the handler only writes the signal's number into a pipe (all a
// handler may safely do). A thread of its own reads it, runs the `record` callback with ordinary code,
// then restores the default action and re-sends the signal, so the process ends exactly as it
// would have (killed by that signal) a few milliseconds later. The supervisor's SIGKILL after
// its grace period bounds a write that hangs. A signal that was ignored when the instance was
// made stays ignored. One instance at a time (the handler reaches it through a global).
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <thread>

namespace kiln::train {

class RecordOnStopSignal {
 public:
  /// `record` runs on the watcher thread with "received SIGTERM" or "received SIGINT", before the
  /// signal takes its course.
  explicit RecordOnStopSignal(std::function<void(const std::string&)> record);
  /// Restores the previous handlers; a signal not yet acted on is then handled by those.
  ~RecordOnStopSignal();
  RecordOnStopSignal(const RecordOnStopSignal&) = delete;
  RecordOnStopSignal& operator=(const RecordOnStopSignal&) = delete;

 private:
  void watch();

  std::function<void(const std::string&)> record_;
  int pipe_[2] = {-1, -1};
  struct sigaction old_term_ {}, old_int_ {};
  bool installed_term_ = false, installed_int_ = false;
  std::thread watcher_;
};

}  // namespace kiln::train
