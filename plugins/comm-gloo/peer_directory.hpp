// PeerDirectory: each rank's process (host, pid namespace, pid, start time) and pair address, so a
// failed collective can name the rank(s) that are gone. Non-blocking signals: a same-host peer is
// checked in /proc (zombie, exiting or pid reused = gone) or with kill(pid, 0); otherwise Gloo's
// "[ip]:port" is matched against the address the rank published for its pair with us (across hosts,
// but only says which connection failed, and only when we dialled it). Stopped ranks (state T or t
// in /proc: a SIGSTOP or a debugger) and gone ranks are named, stopped first; the connection
// only when neither was found.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::gloo_comm {

/// What identifies one process for later "does it still exist?" checks.
struct ProcessIdentity {
  std::string host;          // gethostname()
  std::string pid_namespace; // readlink("/proc/self/ns/pid"); same host + namespace => pids comparable
  std::int64_t pid = 0;
  std::string start_ticks;   // field 22 of /proc/<pid>/stat; guards against pid reuse

  /// This process.
  static ProcessIdentity self();
  /// One line, "host\tnamespace\tpid\tstart", for the rendezvous store.
  std::vector<std::uint8_t> encode() const;
  /// Inverse of encode(); a malformed value yields an identity with pid 0 (never checked).
  static ProcessIdentity decode(const std::vector<std::uint8_t>& bytes);
};

/// Whether a process still exists, as far as this host can tell.
/// `stopped`: the process exists but is stopped (SIGSTOP, SIGTSTP, a debugger), so it makes no
/// progress; it is named like a gone rank, since it is what the others are waiting for.
enum class Liveness : std::uint8_t { alive, gone, stopped, unknown };

class PeerDirectory {
 public:
  PeerDirectory() = default;
  /// `processes[r]` and `addresses[r]` ("[ip]:port", "" if unknown) per rank; `self` is ours.
  PeerDirectory(int self, std::vector<ProcessIdentity> processes, std::vector<std::string> addresses);

  /// Liveness of rank `r`'s process as seen from this process (unknown on another host).
  Liveness liveness(int r) const;

  /// A clause naming every rank that is stopped, then every one that is gone, e.g. "rank 2 is gone
  /// (its process 12345 on host vm no longer exists)"; if none is, the rank whose address
  /// `gloo_message` names; else "".
  std::string explain(std::string_view gloo_message) const;

 private:
  int self_ = 0;
  ProcessIdentity own_;
  std::vector<ProcessIdentity> processes_;
  std::vector<std::string> addresses_;
};

}  // namespace kiln::gloo_comm
