// The load probe (why in load_probe.hpp).
#include "load_probe.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>

#include "kiln/errors.hpp"

namespace kiln::plugin {
namespace {

constexpr char kLoaded = 'y';
constexpr char kDlopenFailed = 'n';

int probe_timeout_ms() {
  if (const char* v = std::getenv("KILN_PLUGIN_PROBE_TIMEOUT_S")) {
    const int s = std::atoi(v);
    if (s > 0 && s <= 3600) return s * 1000;
  }
  return 60000;
}

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? fmt::format("signal {} (SIG{})", sig, abbrev) : fmt::format("signal {}", sig);
}

/// Waits for the child's one byte; returns it, or 0 if the pipe closed first or time ran out
/// (`timed_out` says which).
char read_report(int fd, int timeout_ms, bool& timed_out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      return 0;
    }
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char c = 0;
    const ssize_t got = ::read(fd, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    return got == 1 ? c : 0;
  }
}

}  // namespace

void probe_library_load(const std::filesystem::path& library) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw PluginError(fmt::format("cannot check plugin library {}: pipe failed: {}", library.string(), ::strerror(errno)));
  }
  const std::string path = library.string();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw PluginError(fmt::format("cannot check plugin library {}: fork failed: {}", path, ::strerror(err)));
  }
  if (pid == 0) {
    // The host's signal handlers (a test framework's, a crash reporter's) must not turn a crash
    // into something else, and nothing may be blocked: the parent reads the raw outcome.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::close(fds[0]);
    const char report = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) ? kLoaded : kDlopenFailed;
    [[maybe_unused]] const ssize_t n = ::write(fds[1], &report, 1);
    ::_exit(0);
  }
  ::close(fds[1]);
  bool timed_out = false;
  const char report = read_report(fds[0], probe_timeout_ms(), timed_out);
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (report == kLoaded || report == kDlopenFailed) return;
  std::string what;
  if (timed_out) {
    what = fmt::format("did not finish loading within {} s (its initialisation code hangs)", probe_timeout_ms() / 1000);
  } else if (WIFSIGNALED(status)) {
    what = fmt::format("killed the loading process with {} while loading", signal_text(WTERMSIG(status)));
  } else {
    what = fmt::format("ended the loading process with exit status {} while loading (its initialisation code "
                       "calls exit); a plugin must never end the process",
                       WEXITSTATUS(status));
  }
  throw PluginError(fmt::format("plugin library {} {}; refusing it (checked in a child process, so this run was "
                                "not affected; remove the library from the plugin path or fix it)",
                                path, what));
}

}  // namespace kiln::plugin
