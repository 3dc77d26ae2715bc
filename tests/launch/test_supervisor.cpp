// The --nproc supervisor with stand-in ranks (launch_child) instead of training: which rank is
// reported and how, the exit status, stopping the other ranks (SIGTERM, then SIGKILL after the
// grace period), forwarded signals, stopped ranks and a job stopped by Ctrl-Z, the ranks'
// environment, and that no rank outlives it.
// Every run is under a hard wall clock (kiln::test::Process kills the whole tree and the test
// fails); the limits are far above what the runs need and no assertion is about timing.
#define KILN_TEST_MODULE test_supervisor
#include "kiln_test_main.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "kiln/launch/rendezvous_dir.hpp"
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
    r.pids = rank_pids(nproc);
    return r;
  }

  /// rank -> pid, from the pid files the ranks have written so far.
  std::map<int, pid_t> rank_pids(int nproc) const {
    std::map<int, pid_t> pids;
    for (int rank = 0; rank < nproc; ++rank) {
      const std::string text = slurp(dir / fmt::format("rank{}.pid", rank));
      if (!text.empty()) pids[rank] = static_cast<pid_t>(std::stol(text));
    }
    return pids;
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

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

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
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 1 (pid {} on host {}) exited with status 3; stopped the other 3 ranks\n",
                                  r.pids.at(1), host()));
  BOOST_TEST(r.out == "failed_rank=1\n");
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(signal_death_is_named) {
  Case c;
  const Run r = c.run(4, 5000, {"2=signal:9", "*=sleep:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST_REQUIRE(r.pids.count(2) == 1u);
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 2 (pid {} on host {}) was killed by signal 9 (SIGKILL); stopped the other 3 "
                                  "ranks\n",
                                  r.pids.at(2), host()));
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(segfault_is_named) {
  Case c;
  const Run r = c.run(2, 5000, {"0=signal:11", "*=sleep:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 0 (pid {} on host {}) was killed by signal 11 (SIGSEGV); stopped the other "
                                  "rank\n",
                                  r.pids.at(0), host()));
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(sigterm_ignored_then_sigkill) {
  // Rank 1 ignores SIGTERM for 100 s; the supervisor must SIGKILL it after the 300 ms grace.
  Case c;
  const Run r = c.run(2, 300, {"0=exit:1", "*=stubborn:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung: the stubborn rank was never killed");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST(r.err ==
             fmt::format("kiln: error: rank 0 (pid {} on host {}) exited with status 1; stopped the other rank\n", r.pids.at(0),
                         host()));
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
  BOOST_TEST(r.err == fmt::format("kiln: error: rank 2 (pid {} on host {}) was killed by signal 9 (SIGKILL); no other rank was "
                                  "running\n",
                                  r2, host()));
}

BOOST_AUTO_TEST_CASE(stopped_rank_is_blamed_when_a_peer_fails) {
  // Rank 1 stops itself (SIGSTOP); rank 0 then fails, as a real rank would on its collective's
  // timeout. The stopped rank is the one named, the failing peer is mentioned, nothing survives.
  Case c;
  const Run r = c.run(3, 300, {"1=signal:19", "0=after-stop:1:1", "*=sleep:100"});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST_REQUIRE(r.pids.size() == 3u);
  BOOST_TEST(r.out == "failed_rank=1\n");
  const std::string warning =
      fmt::format("kiln: warning: rank 1 (pid {} on host {}) was stopped by signal 19 (SIGSTOP); the other ranks wait "
                  "for it: continue it (kill -CONT {}) or the job fails\n",
                  r.pids.at(1), host(), r.pids.at(1));
  const std::string error =
      fmt::format("kiln: error: rank 1 (pid {} on host {}) was stopped by signal 19 (SIGSTOP) and made no progress; "
                  "rank 0 (pid {}) then exited with status 1; stopped 2 ranks\n",
                  r.pids.at(1), host(), r.pids.at(0));
  BOOST_TEST(r.err == warning + error);
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(rank_stopped_past_the_stall_limit_ends_the_job) {
  // Nobody else fails (a single stopped rank would otherwise hang the job forever): the stall
  // limit (dist.timeout_s under kiln train) ends it, naming the rank.
  Case c;
  const Run r = c.run(2, 300, {"1=signal:19", "*=sleep:100"}, "-", {{"KILN_TEST_STALL_MS", "500"}});
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST_REQUIRE(r.pids.size() == 2u);
  BOOST_TEST(r.out == "failed_rank=1\n");
  BOOST_TEST(contains(r.err, fmt::format("kiln: warning: rank 1 (pid {} on host {}) was stopped by signal 19 "
                                                     "(SIGSTOP)",
                                                     r.pids.at(1), host())),
             r.err);
  BOOST_TEST(contains(r.err, fmt::format("kiln: error: rank 1 (pid {} on host {}) was stopped by signal 19 "
                                                     "(SIGSTOP) and stayed stopped for 0.5 s, the stall limit "
                                                     "(dist.timeout_s); stopped 2 ranks\n",
                                                     r.pids.at(1), host())),
             r.err);
  check_none_alive(r);
}

BOOST_AUTO_TEST_CASE(continued_rank_is_not_blamed) {
  // A rank stopped and continued before anything fails is only warned about.
  Case c;
  auto p = c.start(2, 300, {"1=sleep:100", "*=sleep:100"}, "-", {{"KILN_TEST_STALL_MS", "600000"}});
  c.wait_for_ranks(2);
  const pid_t r1 = static_cast<pid_t>(std::stol(slurp(c.dir / "rank1.pid")));
  const pid_t r0 = static_cast<pid_t>(std::stol(slurp(c.dir / "rank0.pid")));
  ::kill(r1, SIGSTOP);
  // Wait until the supervisor has said so, then continue it and fail rank 0.
  const auto deadline = std::chrono::steady_clock::now() + kWallClock;
  while (!contains(slurp(c.dir / "err.txt"), "kiln: warning: rank 1")) {
    BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < deadline), "no warning about the stopped rank");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(r1, SIGCONT);
  // The continue must be seen before rank 0 fails: wait until rank 1 runs again.
  while (contains(slurp(fmt::format("/proc/{}/stat", r1)), ") T ")) {
    BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < deadline), "rank 1 never continued");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Even if the supervisor reaps both changes at once, the continue is applied before the death.
  ::kill(r0, SIGKILL);
  const Run r = c.finish(*p, 2);
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 1);
  BOOST_TEST(contains(
                 r.err, fmt::format("kiln: error: rank 0 (pid {} on host {}) was killed by signal 9 (SIGKILL)", r0, host())),
             r.err);
}

BOOST_AUTO_TEST_CASE(job_stopped_by_ctrl_z_gets_one_warning) {
  // Ctrl-Z sends SIGTSTP to the whole process group (the supervisor and its ranks), fg then a
  // SIGCONT: the supervisor, stopped too, prints one line about the job, none per rank.
  Case c;
  auto p = c.start(3, 300, {"*=sleep:100"}, "-", {{"KILN_TEST_STALL_MS", "600000"}});
  c.wait_for_ranks(3);
  std::vector<pid_t> all = {p->pid()};
  for (const auto& [rank, pid] : c.rank_pids(3)) all.push_back(pid);
  ::kill(-p->pid(), SIGTSTP);  // the group Process made for the driver
  const auto deadline = std::chrono::steady_clock::now() + kWallClock;
  for (const pid_t pid : all) {
    while (!contains(slurp(fmt::format("/proc/{}/stat", pid)), ") T ")) {
      BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < deadline), "pid " << pid << " never stopped");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ::kill(-p->pid(), SIGCONT);
  const std::string job_line = "kiln: warning: the job was stopped and continued (job control, e.g. Ctrl-Z then fg)";
  while (!contains(slurp(c.dir / "err.txt"), job_line)) {
    BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < deadline), "no warning about the job: "
                                                                           << slurp(c.dir / "err.txt"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(p->pid(), SIGTERM);
  const Run r = c.finish(*p, 3);
  BOOST_TEST_REQUIRE(r.status.has_value(), "supervisor hung");
  BOOST_TEST(*r.status == 128 + SIGTERM);
  std::size_t warnings = 0;
  for (std::size_t at = r.err.find("kiln: warning: "); at != std::string::npos; at = r.err.find("kiln: warning: ", at + 1)) {
    ++warnings;
  }
  BOOST_TEST(warnings == 1u, r.err);
  BOOST_TEST(!contains(r.err, "kiln: warning: rank"), r.err);
  BOOST_TEST(contains(r.err, "kiln: error: interrupted by SIGTERM; stopped 3 ranks\n"), r.err);
  check_none_alive(r);
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

BOOST_AUTO_TEST_CASE(stale_rendezvous_dirs_are_removed) {
  // A killed supervisor cannot remove its rendezvous directory; the next one removes it, and
  // only directories whose recorded supervisor is gone.
  Case c;
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  int status = 0;
  ::waitpid(gone, &status, 0);
  const auto make = [&](const std::string& name, const std::string& owner) {
    fs::create_directories(c.dir / name);
    if (!owner.empty()) std::ofstream(c.dir / name / "supervisor") << owner << "\n";
  };
  make("kiln-rendezvous-dead", fmt::format("{} 12345", gone));
  make("kiln-rendezvous-alive", fmt::format("{} {}", ::getpid(), "0"));  // start time differs: pid reused
  make("kiln-rendezvous-nofile", "");
  make("other-dir", fmt::format("{} 12345", gone));
  std::string self_stat = slurp("/proc/self/stat");
  const auto close = self_stat.rfind(')');
  std::istringstream fields(self_stat.substr(close + 2));
  std::string field, ticks;
  for (int i = 3; i <= 22 && fields >> field; ++i) ticks = field;
  make("kiln-rendezvous-mine", fmt::format("{} {}", ::getpid(), ticks));

  BOOST_TEST(kiln::launch::remove_stale_rendezvous_dirs(c.dir) == 2);
  BOOST_TEST(!fs::exists(c.dir / "kiln-rendezvous-dead"));
  BOOST_TEST(!fs::exists(c.dir / "kiln-rendezvous-alive"));
  BOOST_TEST(fs::exists(c.dir / "kiln-rendezvous-nofile"));
  BOOST_TEST(fs::exists(c.dir / "other-dir"));
  BOOST_TEST(fs::exists(c.dir / "kiln-rendezvous-mine"));

  {
    kiln::launch::RendezvousDir dir(c.dir);
    BOOST_TEST(fs::is_directory(dir.path()));
    BOOST_TEST(slurp(dir.path() / "supervisor") == fmt::format("{} {}\n", ::getpid(), ticks));
    BOOST_TEST(kiln::launch::remove_stale_rendezvous_dirs(c.dir) == 0);  // its own is alive
  }
}
