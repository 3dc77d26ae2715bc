// StopSignalDeferral: SIGTERM/SIGINT during a start are held back; they take effect when the
// start commits, are dropped when it fails (the rank exits with its own error), and an ignored
// signal stays ignored. Each case runs in a forked child, since the signals end the process.
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <stdexcept>

#include "kiln/io/stop_signal_deferral.hpp"

namespace {

struct ChildEnd {
  bool signalled = false;
  int signal = 0;
  int status = -1;
};

/// Runs `body` in a forked child; the child exits with the value `body` returns (if it returns).
ChildEnd run_in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(body());
  int wstatus = 0;
  BOOST_TEST_REQUIRE(::waitpid(pid, &wstatus, 0) == pid);
  ChildEnd end;
  if (WIFSIGNALED(wstatus)) {
    end.signalled = true;
    end.signal = WTERMSIG(wstatus);
  } else if (WIFEXITED(wstatus)) {
    end.status = WEXITSTATUS(wstatus);
  }
  return end;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stop_signal_deferral)

BOOST_AUTO_TEST_CASE(a_signal_during_a_committed_start_takes_effect_at_its_end) {
  const ChildEnd end = run_in_child([] {
    {
      kiln::io::StopSignalDeferral held;
      ::raise(SIGTERM);
      // Still alive here, with the signal recorded.
      if (kiln::io::StopSignalDeferral::pending() != SIGTERM) return 2;
    }
    return 3;  // not reached: the deferral's end raised SIGTERM again
  });
  BOOST_TEST(end.signalled);
  BOOST_TEST(end.signal == SIGTERM);
  BOOST_TEST(end.status == -1, "the child exited with " << end.status << " (2: not recorded, 3: not raised again)");
}

BOOST_AUTO_TEST_CASE(a_signal_from_another_thread_or_process_is_held_too) {
  const ChildEnd end = run_in_child([] {
    {
      kiln::io::StopSignalDeferral held;
      ::kill(::getpid(), SIGINT);  // process-directed, as the supervisor's
      if (kiln::io::StopSignalDeferral::pending() != SIGINT) return 2;
    }
    return 3;
  });
  BOOST_TEST(end.signalled);
  BOOST_TEST(end.signal == SIGINT);
}

BOOST_AUTO_TEST_CASE(a_failed_start_drops_the_signal_and_exits_with_its_error) {
  const ChildEnd end = run_in_child([] {
    try {
      kiln::io::StopSignalDeferral held;
      ::raise(SIGTERM);
      throw std::runtime_error("the start failed");
    } catch (const std::runtime_error&) {
      // The default disposition is back: a later SIGTERM would end the process.
      struct sigaction now {};
      ::sigaction(SIGTERM, nullptr, &now);
      return now.sa_handler == SIG_DFL ? 7 : 8;
    }
  });
  BOOST_TEST(!end.signalled, "killed by signal " << end.signal);
  BOOST_TEST(end.status == 7);
}

BOOST_AUTO_TEST_CASE(an_ignored_signal_stays_ignored) {
  const ChildEnd end = run_in_child([] {
    ::signal(SIGTERM, SIG_IGN);
    {
      kiln::io::StopSignalDeferral held;
      ::raise(SIGTERM);
      if (kiln::io::StopSignalDeferral::pending() != 0) return 2;
    }
    struct sigaction now {};
    ::sigaction(SIGTERM, nullptr, &now);
    return now.sa_handler == SIG_IGN ? 0 : 4;
  });
  BOOST_TEST(!end.signalled, "killed by signal " << end.signal);
  BOOST_TEST(end.status == 0);
}

BOOST_AUTO_TEST_CASE(without_a_signal_nothing_happens) {
  const ChildEnd end = run_in_child([] {
    { kiln::io::StopSignalDeferral held; }
    struct sigaction now {};
    ::sigaction(SIGTERM, nullptr, &now);
    return now.sa_handler == SIG_DFL ? 0 : 4;
  });
  BOOST_TEST(!end.signalled);
  BOOST_TEST(end.status == 0);
}

BOOST_AUTO_TEST_SUITE_END()
