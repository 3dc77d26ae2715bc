// RunDirClaim: one start per run directory. Default folders are won by mkdir, so starts in the
// same second get their own; a held folder is refused with its holder; a fresh start finds a
// run that appeared meanwhile; a failed creation says why; the lock ends with its holder.
#include <boost/test/unit_test.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../support/error_text.hpp"
#include "../support/temp_dir.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/run_dir_claim.hpp"
#include "kiln/io/run_dir_rollback.hpp"
#include "kiln/io/run_status.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::io::RunDirClaim;
using kiln::io::RunDirMode;
using kiln::test::TempDir;

/// Runs `body` with `dir` as the working directory, restoring the old one however it ends.
template <typename F>
void in_dir(const fs::path& dir, F body) {
  const fs::path old = fs::current_path();
  fs::current_path(dir);
  try {
    body();
  } catch (...) {
    fs::current_path(old);
    throw;
  }
  fs::current_path(old);
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_dir_claim)

BOOST_AUTO_TEST_CASE(starts_at_the_same_moment_each_win_their_own_default_folder) {
  // Eight processes released together, as a sweep launched with `&` is: each writes its pid
  // into the folder it claimed. The same name for two would leave one pid, or one error.
  const TempDir tmp("claim");
  constexpr int kStarts = 8;
  int go[2];
  BOOST_REQUIRE(::pipe(go) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kStarts; ++i) {
    const pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(go[1]);
      char byte = 0;
      if (::read(go[0], &byte, 1) != 0) ::_exit(3);  // wait for the pipe to close: everyone at once
      int code = 0;
      try {
        fs::current_path(tmp.path);
        const RunDirClaim claim = RunDirClaim::take("", RunDirMode::fresh);
        std::ofstream(claim.dir() / "pid") << ::getpid();
      } catch (...) {
        code = 2;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  for (const pid_t pid : children) {
    int status = 0;
    BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  std::set<std::string> pids;
  for (const auto& entry : fs::directory_iterator(tmp.path / "runs")) pids.insert(slurp(entry.path() / "pid"));
  BOOST_TEST(pids.size() == static_cast<std::size_t>(kStarts));
  std::set<std::string> expected;
  for (const pid_t pid : children) expected.insert(std::to_string(pid));
  BOOST_TEST((pids == expected));
}

BOOST_AUTO_TEST_CASE(a_held_folder_is_refused_naming_its_holder_until_it_is_released) {
  const TempDir tmp("claim");
  const fs::path dir = tmp.path / "run";
  std::optional<RunDirClaim> first(RunDirClaim::take(dir.string(), RunDirMode::fresh));
  BOOST_TEST(first->unlocked_reason() == "");
  BOOST_TEST(kiln::io::run_dir_in_use(dir));
  // Still starting: no status.json says "running" yet (a resumed run's old one may say anything).
  BOOST_TEST(kiln::test::error_text<kiln::IoError>([&] { (void)RunDirClaim::take(dir.string(), RunDirMode::resume); }) ==
             "run directory " + dir.string() + " is in use by another kiln train (still starting: it has not written "
             "a running status.json yet); wait for it to end or stop it, or choose another --run-dir");
  kiln::io::RunStatus status = kiln::io::run_status_now("running", 3, 10, 300);
  status.pid = 4242;
  status.host = "node7";
  kiln::io::write_run_status(dir, status);
  BOOST_TEST(kiln::test::error_text<kiln::IoError>([&] { (void)RunDirClaim::take(dir.string(), RunDirMode::fresh); }) ==
             "run directory " + dir.string() + " is in use by another kiln train (pid 4242 on host node7; its "
             "status.json says running, 3 of 10 epochs done); wait for it to end or stop it, or choose another "
             "--run-dir");
  first.reset();  // the holder ends: its lock goes with it
  BOOST_TEST(!kiln::io::run_dir_in_use(dir));
  const RunDirClaim second = RunDirClaim::take(dir.string(), RunDirMode::resume);
  BOOST_TEST(second.dir() == dir);
  BOOST_TEST(second.created().empty());
}

BOOST_AUTO_TEST_CASE(a_fresh_start_refuses_a_run_that_finished_there) {
  const TempDir tmp("claim");
  const fs::path dir = tmp.path / "run";
  {
    const RunDirClaim first = RunDirClaim::take(dir.string(), RunDirMode::fresh);
    std::ofstream(dir / "metrics.jsonl") << "{\"epoch\": 1}\n";
  }
  BOOST_TEST(kiln::test::error_text<kiln::IoError>([&] { (void)RunDirClaim::take(dir.string(), RunDirMode::fresh); }) ==
             "run directory " + dir.string() +
                 " already holds a run (metrics.jsonl); choose another --run-dir or move the old run away");
  BOOST_TEST(slurp(dir / "metrics.jsonl") == "{\"epoch\": 1}\n");
}

BOOST_AUTO_TEST_CASE(what_a_claim_made_is_listed_and_a_failed_start_removes_only_that) {
  const TempDir tmp("claim");
  const fs::path dir = tmp.path / "a" / "b" / "c";
  fs::create_directories(tmp.path / "a");
  {
    const RunDirClaim claim = RunDirClaim::take(dir.string() + "/", RunDirMode::fresh);
    BOOST_TEST(claim.dir() == dir);  // the trailing slash names the same folder
    BOOST_TEST((claim.created() == std::vector<fs::path>{tmp.path / "a" / "b", dir}));
    kiln::io::RunDirRollback rollback(claim.dir(), claim.created());
    std::ofstream(dir / "config.toml") << "x";
    // Another run put beside this one in the folder this start made: it stays.
    fs::create_directories(tmp.path / "a" / "b" / "other");
  }
  BOOST_TEST(!fs::exists(dir));
  BOOST_TEST(fs::is_directory(tmp.path / "a" / "b" / "other"));
}

BOOST_AUTO_TEST_CASE(a_file_in_the_way_is_named) {
  const TempDir tmp("claim");
  std::ofstream(tmp.path / "runs") << "not a folder";
  in_dir(tmp.path, [] {
    BOOST_TEST(kiln::test::error_text<kiln::IoError>([] { (void)RunDirClaim::take("", RunDirMode::fresh); }) ==
               "cannot create run directory runs: a file of that name is in the way");
  });
  const fs::path dir = tmp.path / "file" / "run";
  std::ofstream(tmp.path / "file") << "x";
  BOOST_TEST(kiln::test::error_text<kiln::IoError>([&] { (void)RunDirClaim::take(dir.string(), RunDirMode::fresh); }) ==
             "cannot create run directory " + (tmp.path / "file").string() + ": a file of that name is in the way");
}

BOOST_AUTO_TEST_SUITE_END()
