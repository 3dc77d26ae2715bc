// A SIGKILLed gloo rank is named by the survivors, on Gloo's ring and on the star path. The ranks are forked processes, so this case
// lives in its own executable: forking a process that already runs communicator or OpenMP threads
// (as test_comm does by then) can leave a child stuck on a lock held by a thread that did not
// survive the fork.
#define KILN_TEST_MODULE test_gloo_peer_death
#include "kiln_test_main.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "comm_fixture.hpp"
#include "kiln/dist/file_store.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

using std::chrono::milliseconds;

/// Writes all of `text` to `fd` (a child's report to the parent).
void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

/// Body of forked rank `r` of 3: connect through the FileStore at `dir`, all_reduce once, then
/// rank 2 dies by SIGKILL and ranks 0 and 1 all_reduce again. Reports one line to `fd` and
/// leaves with _exit() so that nothing of the parent's test state runs twice.
[[noreturn]] void killed_peer_rank(int r, const std::filesystem::path& dir, int fd, const std::string& params) {
  std::string report;
  try {
    dist::FileStore store(dir, 3);
    auto comm = make_communicator("gloo", "interface = \"lo\"\n" + params, rank_of(r, 3));
    comm->connect(CommContext{rank_of(r, 3), &store, &cpu(), milliseconds(3000)});
    Tensor t = make_tensor(std::vector<double>(1000, 1.0), DType::f32);
    comm->all_reduce(t, ReduceOp::sum)->wait();
    if (r == 2) ::raise(SIGKILL);
    report = "no error: " + std::to_string(read_values(t)[0]);
    try {
      comm->all_reduce(t, ReduceOp::sum)->wait();
    } catch (const CommError& e) {
      report = std::string("CommError: ") + e.what();
    }
  } catch (const std::exception& e) {
    report = std::string("unexpected: ") + e.what();
  }
  write_all(fd, report);
  ::close(fd);
  ::_exit(0);
}

/// Everything `fd` delivers until EOF or `deadline`.
std::string read_until_eof(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string out;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out + " [no EOF before the wall clock ran out]";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

/// Forks 3 ranks of a gloo world with `params`; rank 2 is SIGKILLed after one all_reduce, and the
/// survivors' next all_reduce (which runs on `path`) must name it.
void survivors_name_a_sigkilled_rank(const std::string& params, const std::string& path) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln-test-gloo-kill-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  std::vector<int> reads;
  for (int r = 0; r < 3; ++r) {
    int fds[2];
    BOOST_TEST_REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    BOOST_TEST_REQUIRE(pid >= 0);
    if (pid == 0) {
      for (int fd : reads) ::close(fd);
      ::close(fds[0]);
      killed_peer_rank(r, dir, fds[1], params);
    }
    ::close(fds[1]);
    pids.push_back(pid);
    reads.push_back(fds[0]);
  }
  // Hard wall clock: the 3 s communicator timeout bounds every wait; 60 s is only a hang guard.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<std::string> reports;
  for (int fd : reads) {
    reports.push_back(read_until_eof(fd, deadline));
    ::close(fd);
  }
  std::vector<int> statuses;
  for (const pid_t pid : pids) {
    // A child closes its pipe just before _exit(), so give it until the wall clock to finish;
    // only a hung one is stopped with SIGKILL.
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      ::usleep(1000);
    }
    statuses.push_back(status);
  }
  std::filesystem::remove_all(dir);
  BOOST_TEST((WIFSIGNALED(statuses[2]) && WTERMSIG(statuses[2]) == SIGKILL), "rank 2 status " << statuses[2]);
  BOOST_TEST(reports[2] == "");
  for (int r : {0, 1}) {
    const std::string& msg = reports[static_cast<std::size_t>(r)];
    BOOST_TEST((WIFEXITED(statuses[static_cast<std::size_t>(r)]) && WEXITSTATUS(statuses[static_cast<std::size_t>(r)]) == 0),
               "rank " << r << " status " << statuses[static_cast<std::size_t>(r)]);
    BOOST_TEST(msg.find(fmt::format("CommError: gloo all_reduce #1 (f32 x 1000, {}) failed on rank {} of 3: ", path, r)) == 0u, msg);
    BOOST_TEST(msg.find(fmt::format("rank 2 is gone (its process {} on host ", pids[2])) != std::string::npos, msg);
    BOOST_TEST(msg.find("rank 1 is gone") == std::string::npos, msg);
    BOOST_TEST(msg.find("rank 0 is gone") == std::string::npos, msg);
    BOOST_TEST(msg.find("could not tell which peer") == std::string::npos, msg);
    BOOST_TEST_MESSAGE("rank " << r << " reports: " << msg);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gloo_failures)

BOOST_AUTO_TEST_CASE(survivors_name_a_sigkilled_rank_on_the_ring) {
  survivors_name_a_sigkilled_rank("star_max_bytes = 0", "ring");
}

// The default: a 4000-byte all-reduce takes the star path (star_path.hpp).
BOOST_AUTO_TEST_CASE(survivors_name_a_sigkilled_rank_on_the_star) { survivors_name_a_sigkilled_rank("", "star"); }

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
