// The --nproc supervisor with stand-in ranks (launch_child) instead of training: which rank is
// reported and how, the exit status, stopping the other ranks (SIGTERM, then SIGKILL after the
// grace period), forwarded signals, the ranks' environment, and that no rank outlives it.
// Every run is under a hard wall clock (kiln::test::Process kills the whole tree and the test
// fails); the limits are far above what the runs need and no assertion is about timing.
#define BOOST_TEST_MODULE test_supervisor
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <thread>

#include "kiln/launch/supervisor.hpp"
#include "process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::Process;
using kiln::test::slurp;

const std::string kDriver = std::string(KILN_BINARY_DIR) + "/tests/launch_driver";
const std::string kChild = std::string(KILN_BINARY_DIR) + "/tests/launch_child";
constexpr std::chrono::seconds kWallClock{60};

struct Run {
  std::optional<int> status;  ///< nullopt: hit the wall clock
  std::string out, err;
  std::map<int, pid_t> pids;  ///< rank -> pid, from the children's pid files
};

struct Case {
  fs::path dir = kiln::test::scratch_dir(fmt::format("supervisor-{}", counter()));
  static int counter() {
    static int n = 0;
    return n++;
  }
  ~Case() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  std::map<std::string, std::optional<std::string>> env() const {
    return {{"KILN_TEST_PIDDIR", dir.string()}, {"OMP_NUM_THREADS", std::nullopt}};
  }

  std::unique_ptr<Process> start(int nproc, int grace_ms, const std::vector<std::string>& actions,
                                 const std::string& rendezvous = "-",
                                 std::map<std::string, std::optional<std::string>> extra_env = {}) {
    std::vector<std::string> argv = {kDriver, std::to_string(nproc), std::to_string(grace_ms), rendezvous, kChild};
    argv.insert(argv.end(), actions.begin(), actions.end());
    auto e = env();
    for (auto& [k, v] : extra_env) e[k] = v;
    return std::make_unique<Process>(argv, e, dir, dir / "out.txt", dir / "err.txt");
  }

  Run finish(Process& p, int nproc) {
    Run r;
    r.status = p.wait_for(kWallClock);
    r.out = slurp(dir / "out.txt");
    r.err = slurp(dir / "err.txt");
    for (int rank = 0; rank < nproc; ++rank) {
      const std::string text = slurp(dir / fmt::format("rank{}.pid", rank));
      if (!text.empty()) r.pids[rank] = static_cast<pid_t>(std::stol(text));
    }
    return r;
  }

  Run run(int nproc, int grace_ms, const std::vector<std::string>& actions, const std::string& rendezvous = "-",
          std::map<std::string, std::optional<std::string>> extra_env = {}) {
    auto p = start(nproc, grace_ms, actions, rendezvous, std::move(extra_env));
    return finish(*p, nproc);
  }

  /// Waits (under the wall clock) until every rank has written its pid file.
  void wait_for_ranks(int nproc) {
    const auto deadline = std::chrono::steady_clock::now() + kWallClock;
    for (int rank = 0; rank < nproc; ++rank) {
      while (!fs::exists(dir / fmt::format("rank{}.pid", rank))) {
        BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < deadline), "rank " << rank << " never started");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
};

void check_none_alive(const Run& r) {
  for (const auto& [rank, pid] : r.pids) BOOST_TEST(!kiln::test::process_alive(pid), "rank " << rank << " survived");
}

}  // namespace

BOOST_AUTO_TEST_CASE(all_ranks_succeed) {
  Case c;
  const Run r = c.run(3, 5000, {"*=exit:0"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 0);
  BOOST_TEST(r.err == "");
  BOOST_TEST(r.out == "failed_rank=-1\n");
  BOOST_TEST(r.pids.size() == 3u);
}

BOOST_AUTO_TEST_CASE(exit_status_stops_the_others) {
  Case c;
  const Run r = c.run(4, 5000, {"1=exit:3", "*=sleep:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST_REQUIRE(r.pids.count(1) == 1u);
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 1 (pid {}) exited with status 3; stopped the other 3 ranks\n",
                                  r.pids.at(1)));
  BOOST_TEST(r.out == "failed_rank=1\n");
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(signal_death_is_named) {
  Case c;
  const Run r = c.run(4, 5000, {"2=signal:9", "*=sleep:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST_REQUIRE(r.pids.count(2) == 1u);
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 2 (pid {}) was killed by signal 9 (SIGKILL); stopped the other 3 "
                                  "ranks\n",
                                  r.pids.at(2)));
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(segfault_is_named) {
  Case c;
  const Run r = c.run(2, 5000, {"0=signal:11", "*=sleep:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 0 (pid {}) was killed by signal 11 (SIGSEGV); stopped the other "
                                  "rank\n",
                                  r.pids.at(0)));
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(sigterm_ignored_then_sigkill) {
  // Rank 1 ignores SIGTERM for 100 s; the supervisor must SIGKILL it after the 300 ms grace.
  Case c;
  const Run r = c.run(2, 300, {"0=exit:1", "*=stubborn:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung: the stubborn rank was never killed");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST(r.err ==
             fmt::format("kiln: error: rank 0 (pid {}) exited with status 1; stopped the other rank\n", r.pids.at(0)));
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(last_rank_failing_alone) {
  // Ranks 0 and 1 finish first; rank 2 fails later with nobody left to stop.
  Case c;
  auto p = c.start(3, 5000, {"2=stubborn:100", "*=exit:0"});
  c.wait_for_ranks(3);
  const pid_t r2 = static_cast<pid_t>(std::stol(slurp(c.dir / "rank2.pid")));
  for (int i = 0; i < 3000 && kiln::test::children_of(p->pid()).size() > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(r2, SIGKILL);
  const Run r = c.finish(*p, 3);
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 2 (pid {}) was killed by signal 9 (SIGKILL); no other rank was "
                                  "running\n",
                                  r2));
}

BOOST_AUTO_TEST_CASE(sigterm_to_supervisor_is_forwarded) {
  Case c;
  auto p = c.start(3, 5000, {"*=sleep:100"});
  c.wait_for_ranks(3);
  ::kill(p->pid(), SIGTERM);
  const Run r = c.finish(*p, 3);
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung after SIGTERM");
  BOOST_TEST(*r.status == 128 + SIGTERM);
  BOOST_TEST(r.err == "kiln: error: interrupted by SIGTERM; stopped 3 ranks\n");
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(sigint_to_supervisor_is_forwarded) {
  Case c;
  auto p = c.start(2, 5000, {"*=sleep:100"});
  c.wait_for_ranks(2);
  ::kill(p->pid(), SIGINT);
  const Run r = c.finish(*p, 2);
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung after SIGINT");
  BOOST_TEST(*r.status == 128 + SIGINT);
  BOOST_TEST(r.err == "kiln: error: interrupted by SIGINT; stopped 2 ranks\n");
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(killing_the_supervisor_kills_the_ranks) {
  Case c;
  auto p = c.start(2, 5000, {"*=sleep:100"});
  c.wait_for_ranks(2);
  std::map<int, pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) pids[rank] = static_cast<pid_t>(std::stol(slurp(c.dir / fmt::format("rank{}.pid", rank))));
  ::kill(p->pid(), SIGKILL);  // only the supervisor, not its process group
  BOOST_TEST(p->wait_for(kWallClock).value_or(-1) == 128 + SIGKILL);
  // PR_SET_PDEATHSIG delivers SIGKILL to the ranks; give the kernel a moment to do it.
  for (const auto& [rank, pid] : pids) {
    for (int i = 0; i < 500 && kiln::test::process_alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    BOOST_TEST(!kiln::test::process_alive(pid), "rank " << rank << " outlived its supervisor");
  }
}

BOOST_AUTO_TEST_CASE(ranks_get_launcher_variables) {
  Case c;
  const Run r = c.run(2, 5000, {"*=env:" + c.dir.string(), "extra"}, "file:/some/dir");
  BOOST_TEST_REQUIRE(r.status.value_or(-1) == 0, r.err);
  const int threads = std::max(1, kiln::launch::usable_cores() / 2);
  for (int rank = 0; rank < 2; ++rank) {
    BOOST_TEST(slurp(c.dir / fmt::format("rank{}.txt", rank)) ==
               fmt::format("RANK={}\nWORLD_SIZE=2\nLOCAL_RANK={}\nLOCAL_WORLD_SIZE=2\nKILN_RENDEZVOUS=file:/some/dir\n"
                           "OMP_NUM_THREADS={}\narg=*=env:{}\narg=extra\n",
                           rank, rank, threads, c.dir.string()));
  }
}

BOOST_AUTO_TEST_CASE(user_omp_threads_and_rank_variables) {
  // A user's OMP_NUM_THREADS is kept; RANK/WORLD_SIZE from an outer launcher are replaced.
  Case c;
  const Run r = c.run(1, 5000, {"*=env:" + c.dir.string()}, "-",
                      {{"OMP_NUM_THREADS", "7"}, {"RANK", "5"}, {"WORLD_SIZE", "9"}, {"KILN_RENDEZVOUS", std::nullopt}});
  BOOST_TEST_REQUIRE(r.status.value_or(-1) == 0, r.err);
  BOOST_TEST(slurp(c.dir / "rank0.txt") ==
             fmt::format("RANK=0\nWORLD_SIZE=1\nLOCAL_RANK=0\nLOCAL_WORLD_SIZE=1\nKILN_RENDEZVOUS=<unset>\n"
                         "OMP_NUM_THREADS=7\narg=*=env:{}\n",
                         c.dir.string()));
}

BOOST_AUTO_TEST_CASE(program_that_cannot_run) {
  Case c;
  auto p = std::make_unique<Process>(std::vector<std::string>{kDriver, "2", "5000", "-", "/nonexistent/kiln"}, c.env(),
                                     c.dir, c.dir / "out.txt", c.dir / "err.txt");
  const auto status = p->wait_for(kWallClock);
  BOOST_TEST_REQUIRE(status.has_value(), "supervisor hung");
  BOOST_TEST(*status == 1);
  const std::string err = slurp(c.dir / "err.txt");
  BOOST_TEST(err.find("kiln: error: the supervisor could not execute the rank's program\n") != std::string::npos, err);
  BOOST_TEST(err.find("exited with status 127") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(rank_environment_values) {
  const auto env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  const auto v = kiln::launch::rank_environment(3, 4, 16, "file:/r", env);
  const std::map<std::string, std::string> want{{"RANK", "3"},           {"WORLD_SIZE", "4"},
                                                {"LOCAL_RANK", "3"},     {"LOCAL_WORLD_SIZE", "4"},
                                                {"KILN_RENDEZVOUS", "file:/r"}, {"OMP_NUM_THREADS", "4"},
                                                {"KILN_LAUNCHER", "kiln --nproc"}};
  BOOST_TEST((v == want));
  // Fewer cores than ranks: still one thread each.
  BOOST_TEST(kiln::launch::rank_environment(0, 8, 2, "", env).at("OMP_NUM_THREADS") == "1");
  BOOST_TEST(kiln::launch::rank_environment(0, 8, 2, "", env).count("KILN_RENDEZVOUS") == 0u);
  const auto user = [](const std::string& n) -> std::optional<std::string> {
    return n == "OMP_NUM_THREADS" ? std::optional<std::string>("3") : std::nullopt;
  };
  BOOST_TEST(kiln::launch::rank_environment(0, 2, 16, "", user).count("OMP_NUM_THREADS") == 0u);
}

BOOST_AUTO_TEST_CASE(signal_names) {
  BOOST_TEST(kiln::launch::signal_name(9) == "SIGKILL");
  BOOST_TEST(kiln::launch::signal_name(15) == "SIGTERM");
  BOOST_TEST(kiln::launch::signal_name(11) == "SIGSEGV");
}
