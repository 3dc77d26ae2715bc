// The --nproc supervisor (contract in supervisor.hpp).
//
// Signals: SIGCHLD, SIGINT, SIGTERM and SIGCONT are blocked while supervising and taken synchronously
// with sigtimedwait, so there are no handlers, no races with waitpid and no global state; the
// children get the original mask and default dispositions back before exec. Children are forked
// (not posix_spawn) so each can ask for PR_SET_PDEATHSIG before exec. Between fork and exec the
// child calls only async-signal-safe functions on arrays prepared beforehand.
// Which failure is reported: the first reaped; among children reaped together, a rank killed by
// a signal wins over one that exited non-zero, since a peer's death makes the others fail too.
// A stopped rank (SIGSTOP, a debugger) is seen at once through waitpid(WUNTRACED): it is warned
// about, and blamed when a peer then fails (the peers fail because it stopped answering, usually
// in a collective's timeout), or when it stays stopped past `stall_limit`. Ranks stopped together
// get one warning; so does a whole job stopped by job control (Ctrl-Z sends SIGTSTP to the
// process group, supervisor included), which the supervisor tells from its own pending SIGCONT.
#include "kiln/launch/supervisor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>

#include "kiln/errors.hpp"
#include "kiln/io/host_name.hpp"

extern char** environ;

namespace kiln::launch {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = true;
  int status = 0;  ///< waitpid status once reaped
  std::optional<Clock::time_point> stopped_since;  ///< set while the kernel reports it stopped
  int stop_signal = 0;
};

/// "rank 2 (pid 1234 on host vm)": enough to find the process from another terminal.
std::string who(const Child& c, const std::string& host) {
  return fmt::format("rank {} (pid {} on host {})", c.rank, c.pid, host);
}

std::string seconds_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{:.3g} s", static_cast<double>(d.count()) / 1000.0);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, signal_name(sig));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

std::string ranks_phrase(int n) { return fmt::format("{} rank{}", n, n == 1 ? "" : "s"); }

/// The environment of one child: the supervisor's, with `vars` replacing same-named entries.
std::vector<std::string> child_env(const std::map<std::string, std::string>& vars) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos && vars.count(entry.substr(0, eq))) continue;
    out.push_back(entry);
  }
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// Blocks the supervisor's signals for its lifetime; drains what is pending before restoring
/// the old mask, so a late SIGCHLD never reaches a handler the host program installed.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGCHLD);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    // Blocked, a SIGCONT still continues the process but also stays pending: the supervisor
    // learns that it was stopped itself (job control) and not only its ranks.
    sigaddset(&set_, SIGCONT);
    sigprocmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockedSignals() {
    sigset_t drain;
    sigemptyset(&drain);
    sigaddset(&drain, SIGCHLD);
    sigaddset(&drain, SIGCONT);
    const timespec zero{0, 0};
    while (sigtimedwait(&drain, nullptr, &zero) > 0) {
    }
    sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  const sigset_t& set() const { return set_; }
  const sigset_t& old() const { return old_; }

  /// Takes a pending SIGCONT; true if there was one (the supervisor was stopped and continued).
  bool take_continue() const {
    sigset_t cont;
    sigemptyset(&cont);
    sigaddset(&cont, SIGCONT);
    const timespec zero{0, 0};
    bool any = false;
    while (sigtimedwait(&cont, nullptr, &zero) == SIGCONT) any = true;
    return any;
  }

  /// Waits for one of the blocked signals until `deadline` (forever if none). Returns the
  /// signal, or 0 on timeout.
  int wait(std::optional<Clock::time_point> deadline) const {
    for (;;) {
      int sig;
      if (deadline) {
        const auto left = std::max(Clock::duration::zero(), *deadline - Clock::now());
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
        sig = sigtimedwait(&set_, nullptr, &ts);
      } else {
        sig = sigwaitinfo(&set_, nullptr);
      }
      if (sig > 0) return sig;
      if (errno == EAGAIN) return 0;
      // EINTR: another signal (e.g. SIGSTOP/SIGCONT) interrupted the wait; wait again.
    }
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
};

class Supervisor {
 public:
  Supervisor(const SuperviseOptions& o, const BlockedSignals& signals) : o_(o), signals_(signals) {}

  SuperviseOutcome run() {
    start_all();
    std::optional<Clock::time_point> kill_at;  // set once the remaining ranks were sent SIGTERM
    while (running_count() > 0) {
      const int sig = signals_.wait(next_deadline(kill_at));
      // SIGCHLD is taken before SIGCONT (lower numbers first), so the ranks' stop reports are
      // read below knowing whether the supervisor was stopped with them.
      const bool continued = sig == SIGCONT || signals_.take_continue();
      if (sig == 0 && !kill_at && stalled()) {
        stop_all();
        kill_at = Clock::now() + o_.grace;
        continue;
      }
      if (sig == SIGINT || sig == SIGTERM) {
        if (!interrupted_ && failure_ < 0) {
          interrupted_ = sig;
          stopped_ = running_count();
        }
        send_all(sig);  // forwarded as is; a second Ctrl-C is forwarded too
        if (!kill_at) kill_at = Clock::now() + o_.grace;
      } else if (sig == 0 && kill_at) {
        send_all(SIGKILL);
        kill_at.reset();
      }
      if (reap(continued) && !kill_at && running_count() > 0) {
        stop_all();
        kill_at = Clock::now() + o_.grace;
      }
    }
    return outcome();
  }

 private:
  void start_all() {
    const int cores = usable_cores();
    for (int r = 0; r < o_.nproc; ++r) {
      try {
        start(r, cores);
      } catch (...) {
        send_all(SIGKILL);
        while (running_count() > 0) reap_blocking();
        throw;
      }
    }
  }

  void start(int rank, int cores) {
    std::vector<std::string> argv_s;
    argv_s.push_back(o_.program.string());
    argv_s.insert(argv_s.end(), o_.args.begin(), o_.args.end());
    std::vector<std::string> env_s = child_env(rank_environment(rank, o_.nproc, cores, o_.rendezvous));
    std::vector<char*> argv = c_strings(argv_s);
    std::vector<char*> envp = c_strings(env_s);
    const std::string program = o_.program.string();
    const pid_t parent = ::getpid();
    const sigset_t child_mask = signals_.old();

    const pid_t pid = ::fork();
    if (pid < 0) {
      throw IoError(fmt::format("cannot start rank {} of {}: fork failed: {}", rank, o_.nproc, ::strerror(errno)));
    }
    if (pid == 0) {
      // Child: async-signal-safe calls only.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the supervisor died before prctl took effect
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGCHLD, SIG_DFL);
      ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
      ::execve(program.c_str(), argv.data(), envp.data());
      static const char kMsg[] = "kiln: error: the supervisor could not execute the rank's program\n";
      [[maybe_unused]] const auto n = ::write(2, kMsg, sizeof kMsg - 1);
      ::_exit(127);
    }
    children_.push_back(Child{rank, pid, true, 0});
  }

  /// SIGTERM to every running rank; a stopped one also gets SIGCONT so that it can act on it.
  void stop_all() {
    stopped_ = running_count();
    send_all(SIGTERM);
    for (const Child& c : children_) {
      if (c.running && c.stopped_since) ::kill(c.pid, SIGCONT);
    }
  }

  /// The grace deadline if stopping, else when the longest-stopped rank passes the stall limit.
  std::optional<Clock::time_point> next_deadline(std::optional<Clock::time_point> kill_at) const {
    if (kill_at) return kill_at;
    if (!o_.stall_limit || failure_ >= 0 || interrupted_) return std::nullopt;
    std::optional<Clock::time_point> first;
    for (const Child& c : children_) {
      if (c.running && c.stopped_since && (!first || *c.stopped_since < *first)) first = c.stopped_since;
    }
    if (!first) return std::nullopt;
    return *first + *o_.stall_limit;
  }

  /// Whether a rank has been stopped for longer than the stall limit; if so it is the failure.
  bool stalled() {
    if (!o_.stall_limit || failure_ >= 0 || interrupted_) return false;
    const auto now = Clock::now();
    for (Child& c : children_) {
      if (c.running && c.stopped_since && now - *c.stopped_since >= *o_.stall_limit) {
        failure_ = static_cast<int>(&c - children_.data());
        stall_ = true;
        return true;
      }
    }
    return false;
  }

  const Child* stopped_child() const {
    for (const Child& c : children_) {
      if (c.running && c.stopped_since) return &c;
    }
    return nullptr;
  }

  /// Records a stop or continue report; true if it is a new stop.
  bool note_stop(Child& c, int status) {
    if (WIFSTOPPED(status)) {
      if (c.stopped_since) return false;
      c.stopped_since = Clock::now();
      c.stop_signal = WSTOPSIG(status);
      return true;
    }
    if (WIFCONTINUED(status)) c.stopped_since.reset();
    return false;
  }

  /// One warning (or none) for the ranks that stopped since the last reap. `job_stopped`: the
  /// supervisor was stopped and continued with its ranks, so the whole job was (Ctrl-Z sends
  /// SIGTSTP to the process group, fg or bg a SIGCONT): one line about the job, none per rank.
  void warn_stopped(const std::vector<const Child*>& stopped, bool job_stopped) {
    if (failure_ >= 0 || interrupted_) return;  // being stopped by us anyway
    const std::string limit = o_.stall_limit ? fmt::format(" within {}", seconds_text(*o_.stall_limit)) : "";
    std::string line;
    if (job_stopped) {
      line = fmt::format("the job was stopped and continued (job control, e.g. Ctrl-Z then fg); a rank left stopped "
                         "must be continued (kill -CONT -- -{}){} or the job fails",
                         static_cast<int>(::getpgrp()), limit);
    } else if (stopped.size() == 1) {
      const Child& c = *stopped[0];
      line = fmt::format("{} was stopped by signal {} ({}); the other ranks wait for it: continue it (kill -CONT {}){} "
                         "or the job fails",
                         who(c, host_), c.stop_signal, signal_name(c.stop_signal), static_cast<int>(c.pid), limit);
    } else if (!stopped.empty()) {
      std::vector<std::string> ranks, pids;
      for (const Child* c : stopped) {
        ranks.push_back(std::to_string(c->rank));
        pids.push_back(std::to_string(c->pid));
      }
      line = fmt::format("{} ranks ({}; pids {} on host {}) were stopped by signal {} ({}); the job waits: continue "
                         "them (kill -CONT {}){} or the job fails",
                         stopped.size(), fmt::join(ranks, ", "), fmt::join(pids, ", "), host_, stopped[0]->stop_signal,
                         signal_name(stopped[0]->stop_signal), fmt::join(pids, " "), limit);
    }
    if (line.empty()) return;
    std::fprintf(stderr, "kiln: warning: %s\n", line.c_str());
    std::fflush(stderr);
  }

  int running_count() const {
    return static_cast<int>(std::count_if(children_.begin(), children_.end(), [](const Child& c) { return c.running; }));
  }

  void send_all(int sig) {
    for (const Child& c : children_) {
      if (c.running) ::kill(c.pid, sig);
    }
  }

  /// Reaps every child that has ended and takes stop/continue reports (`continued`: the
  /// supervisor itself was just continued); returns true if this produced the first failure.
  bool reap(bool continued) {
    std::vector<Child*> ended;
    std::vector<const Child*> stopped;
    bool rank_reports = false;  // a rank was reported stopped or continued
    for (Child& c : children_) {
      if (!c.running) continue;
      // Several state changes may be queued (stopped, continued, exited): take them all.
      for (;;) {
        int status = 0;
        const pid_t r = ::waitpid(c.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
        if (r != c.pid) break;
        if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
          if (note_stop(c, status)) stopped.push_back(&c);
          rank_reports = true;
          continue;
        }
        c.running = false;
        c.status = status;
        ended.push_back(&c);
        break;
      }
    }
    // The supervisor stopped alone (its ranks reported nothing) is nothing to warn about.
    warn_stopped(stopped, continued && rank_reports);
    return note_failures(ended);
  }

  void reap_blocking() {
    for (Child& c : children_) {
      if (!c.running) continue;
      int status = 0;
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      c.running = false;
      c.status = status;
    }
  }

  bool note_failures(const std::vector<Child*>& ended) {
    if (failure_ >= 0 || interrupted_) return false;
    const Child* pick = nullptr;
    for (const Child* c : ended) {
      if (!failed(c->status)) continue;
      if (!pick || (WIFSIGNALED(c->status) && !WIFSIGNALED(pick->status))) pick = c;
    }
    if (!pick) return false;
    failure_ = static_cast<int>(pick - children_.data());
    // A peer failing while a rank is stopped: the stopped rank is the cause (the peer timed out
    // waiting for it, or saw its connection stall), so it is the one named.
    if (const Child* s = stopped_child()) {
      consequence_ = failure_;
      failure_ = static_cast<int>(s - children_.data());
    }
    return true;
  }

  SuperviseOutcome outcome() const {
    SuperviseOutcome out;
    if (failure_ >= 0) {
      const Child& f = children_[static_cast<std::size_t>(failure_)];
      out.exit_code = 1;
      out.failed_rank = f.rank;
      // Here the named rank is among those stopped by the supervisor, so all are counted.
      const std::string ended = fmt::format("stopped {}", ranks_phrase(stopped_));
      const std::string stopped_text =
          f.stop_signal ? fmt::format("was stopped by signal {} ({})", f.stop_signal, signal_name(f.stop_signal)) : "";
      if (stall_) {
        out.message = fmt::format("{} {} and stayed stopped for {}, the stall limit (dist.timeout_s); {}", who(f, host_),
                                  stopped_text, seconds_text(*o_.stall_limit), ended);
      } else if (consequence_ >= 0) {
        const Child& c = children_[static_cast<std::size_t>(consequence_)];
        out.message = fmt::format("{} {} and made no progress; rank {} (pid {}) then {}; {}", who(f, host_),
                                  stopped_text, c.rank, c.pid, describe_status(c.status), ended);
      } else {
        out.message = fmt::format("{} {}; {}", who(f, host_), describe_status(f.status),
                                  stopped_ == 0   ? std::string("no other rank was running")
                                  : stopped_ == 1 ? std::string("stopped the other rank")
                                                  : fmt::format("stopped the other {} ranks", stopped_));
      }
    } else if (interrupted_) {
      out.exit_code = 128 + interrupted_;
      out.message = fmt::format("interrupted by {}; stopped {}", signal_name(interrupted_), ranks_phrase(stopped_));
    }
    return out;
  }

  const SuperviseOptions& o_;
  const BlockedSignals& signals_;
  std::vector<Child> children_;
  int failure_ = -1;  ///< index in children_ of the failure reported
  int consequence_ = -1;  ///< index of the rank that failed while failure_ was stopped, or -1
  bool stall_ = false;    ///< failure_ stayed stopped past the stall limit
  std::string host_ = io::host_name();
  int interrupted_ = 0;
  int stopped_ = 0;  ///< ranks still running when the supervisor started stopping them
};

}  // namespace

std::map<std::string, std::string> rank_environment(int rank, int nproc, int cores, const std::string& rendezvous,
                                                    const EnvLookup& env) {
  std::map<std::string, std::string> vars{
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(nproc)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
      {"KILN_LAUNCHER", kKilnNprocLauncher},  // so the ranks' banner says "kiln --nproc", not torchrun
  };
  if (!rendezvous.empty()) vars["KILN_RENDEZVOUS"] = rendezvous;
  if (!env("OMP_NUM_THREADS")) vars["OMP_NUM_THREADS"] = std::to_string(std::max(1, cores / std::max(1, nproc)));
  return vars;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signo);
}

SuperviseOutcome supervise(const SuperviseOptions& options) {
  if (options.nproc < 1) throw ConfigError(fmt::format("--nproc {} must be at least 1", options.nproc));
  BlockedSignals signals;
  Supervisor s(options, signals);
  return s.run();
}

}  // namespace kiln::launch
