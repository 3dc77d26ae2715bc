// A child process under a hard wall clock, for tests that start `kiln` or the supervisor.
//
// The child runs in its own process group, so when it overstays its limit the whole tree it
// started (ranks, helpers) is killed with one SIGKILL and the test fails instead of hanging.
// stdout/stderr go to files the test reads afterwards. Single-threaded tests only (the child
// edits its environment between fork and exec).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::test {

class Process {
 public:
  /// Starts argv[0] (a path) with `env` applied on top of this process's environment
  /// (nullopt: unset), in `cwd`, stdout and stderr redirected to the given files.
  Process(const std::vector<std::string>& argv, const std::map<std::string, std::optional<std::string>>& env,
          const std::filesystem::path& cwd, const std::filesystem::path& out, const std::filesystem::path& err);
  ~Process();  ///< kills the process group if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  /// Waits until the child ends or `limit` passes. Returns the exit status (128 + signal for a
  /// signal), or nullopt after killing the whole process group when the limit passed.
  std::optional<int> wait_for(std::chrono::milliseconds limit);
  bool running() const { return running_; }

 private:
  pid_t pid_ = -1;
  bool running_ = true;
};

/// Whether `pid` names a live (not zombie) process.
bool process_alive(pid_t pid);
/// Live processes whose parent is `parent` (scans /proc).
std::vector<pid_t> children_of(pid_t parent);
/// The value of `name` in /proc/<pid>/environ, if readable and present.
std::optional<std::string> environ_of(pid_t pid, const std::string& name);
/// Whole file as a string ("" if missing).
std::string slurp(const std::filesystem::path& file);
/// A fresh scratch directory under the system temp dir, named after `what` and the pid.
std::filesystem::path scratch_dir(const std::string& what);

}  // namespace kiln::test
