// <run_dir>/status.json: what the run in a run directory is doing, or how it ended, for the
// scripts around a run (a sweep, a Slurm epilogue, `jq -r .state runs/x/status.json`) that would
// otherwise read logs or guess from exit codes they no longer have.
//
// Rank 0 writes it, whole or not at all (atomic_file.hpp): "running" once the run has started
// and again after every epoch, "completed" or "stopped_early" at the end, "failed" with the error
// when the training loop throws, "interrupted" when SIGTERM or SIGINT stops it. A process killed
// outright (SIGKILL, the OOM killer, a fatal signal) cannot write: its file stays "running", with
// its pid and host so a reader on that host can tell (`kill -0`). `kiln train --nproc` closes
// that gap for its jobs: when one fails and the file says "running" (or "interrupted": the
// supervisor's own SIGTERM stopped rank 0), it writes "failed" (a rank failed) or "interrupted"
// (the job was stopped from outside) with its one-line reason.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace kiln::io {

struct RunStatus {
  std::string state;       ///< "running", "completed", "stopped_early", "failed" or "interrupted"
  std::int64_t epoch = 0;  ///< epochs completed (over resumes)
  std::int64_t epochs = 0; ///< run.epochs
  std::int64_t step = 0;   ///< optimizer steps done when it was written (over resumes)
  std::string message;     ///< why it ended: the error, the early stop, "nothing to train: ..."; "" otherwise
  std::optional<double> final_test_accuracy;  ///< at the end, where the run evaluates
  std::int64_t pid = 0;    ///< the writing process (rank 0)
  std::string host;
  double started = 0;      ///< Unix time (s) this process started training
  double updated = 0;      ///< Unix time (s) of this write
};

/// A status for this process (pid, host, started and updated now) in state `state`.
RunStatus run_status_now(std::string state, std::int64_t epoch, std::int64_t epochs, std::int64_t step);

/// The JSON text of `status`, one object on one line.
std::string run_status_json(const RunStatus& status);

/// Writes <run_dir>/status.json atomically, with `updated` set to now. Throws IoError.
void write_run_status(const std::filesystem::path& run_dir, RunStatus status);

/// Reads <run_dir>/status.json; nullopt when there is none, it is not a regular file (a named
/// pipe would block the read), or it is not one this code wrote.
std::optional<RunStatus> read_run_status(const std::filesystem::path& run_dir);

/// Rank 0's status.json during a run: each change is made and written under one lock, since the
/// training thread (an epoch's end) and a stop signal's watcher thread (record_on_signal.hpp) both
/// change it.
class RunStatusFile {
 public:
  RunStatusFile(std::filesystem::path run_dir, RunStatus initial);
  /// Applies `change` to the status and writes the file. Throws IoError.
  void update(const std::function<void(RunStatus&)>& change);
  /// The same for a path that is already reporting an error: a failed write is returned as its
  /// message ("" when written), not thrown over the error that matters.
  std::string update_or_say_why(const std::function<void(RunStatus&)>& change) noexcept;

 private:
  std::filesystem::path run_dir_;
  RunStatus status_;
  std::mutex mutex_;
};

}  // namespace kiln::io
