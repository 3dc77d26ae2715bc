// test_max_restarts: `kiln train --nproc 2 --max-restarts K`. Rank 1's data source crashes in the
// second epoch (tests/plugin/fixtures/crashing_data.cpp); the supervisor reports the failure as
// always, then starts both ranks again with --resume auto from the newest intact checkpoint.
// A crash that happens once: the restarted job completes, with the losses of a job that never
// crashed. A crash every time: it gives up after K restarts. No checkpoint yet: no restart.
// Without --nproc the option is refused. `--resume if-any`: the same command starts the job and,
// run again after the failure, continues it (the torchrun way).
#define KILN_TEST_MODULE test_max_restarts
#include "kiln_test_main.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::fixture_dir;
using kiln::test::run_kiln;
using kiln::test::scratch_dir;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Three epochs of the mlp on `plugin` (32 samples: 4 steps per epoch on each of 2 ranks), a
/// checkpoint after each epoch, on 2 gloo ranks; `marker` is the crash-once fixture's file.
kiln::test::KilnResult train_twice_ranked(const std::string& plugin, const fs::path& run_dir, const fs::path& marker,
                                          std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", "--config", kiln::test::fixture_data_config(plugin, 3).string(),
                                   "--plugin-path", fixture_dir(plugin).string(), "--run-dir", run_dir.string(),
                                   "--nproc", "2", "--set", "comm.type=\"gloo\"", "--set", "log.level=warn"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_kiln(scratch_dir(), args, "export KILN_FIXTURE_CRASH_MARKER=" + marker.string());
}

/// The train records of metrics.jsonl: epoch -> the loss as written.
std::vector<std::pair<int, std::string>> train_losses(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<std::pair<int, std::string>> out;
  for (std::string line; std::getline(in, line);) {
    const auto record = kiln::test::json::parse(line);
    if (record.at("split").string != "train") continue;
    std::ostringstream loss;
    loss.precision(17);
    loss << record.at("loss").number;
    out.emplace_back(static_cast<int>(record.at("epoch").number), loss.str());
  }
  return out;
}

/// <run_dir>/status.json (run_status.hpp).
kiln::test::json::Value status_of(const fs::path& run_dir) {
  std::ifstream in(run_dir / "status.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST_REQUIRE(!text.empty(), "no " << (run_dir / "status.json").string());
  return kiln::test::json::parse(text);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(max_restarts, *boost::unit_test::enable_if<KILN_TEST_HAVE_GLOO>())

BOOST_AUTO_TEST_CASE(a_crash_that_happens_once_is_restarted_from_the_checkpoint_and_the_run_completes) {
  const fs::path marker = scratch_dir() / "crashed-once";
  const fs::path run_dir = scratch_dir() / "run-restarted";
  const auto r = train_twice_ranked("crashes-once-on-rank-1", run_dir, marker, {"--max-restarts", "2"});
  BOOST_TEST(r.status == 0, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(fs::exists(marker));  // it did crash
  BOOST_TEST(contains(r.err, "kiln: error: rank 1 (pid "), r.err);
  BOOST_TEST(contains(r.err, "was killed by signal 11 (SIGSEGV); stopped the other rank\n"), r.err);
  BOOST_TEST(contains(r.err, "kiln: restarting the 2 ranks (restart 1 of 2) from " +
                                 (run_dir / "checkpoints" / "epoch-0001").string() + "\n"),
             r.err);
  BOOST_TEST(contains(r.err, "kiln: the job completed after 1 restart\n"), r.err);
  BOOST_TEST(fs::is_directory(run_dir / "checkpoints" / "epoch-0003"));
  const auto status = status_of(run_dir);  // the restart's rank 0 wrote the end
  BOOST_TEST(status.at("state").string == "completed");
  BOOST_TEST(status.at("epoch").number == 3);
  BOOST_TEST(status.at("epochs").number == 3);
  BOOST_TEST(status.at("message").string == "");

  // The same job where the fixture has already crashed (the marker exists): no crash, no restart.
  const fs::path straight = scratch_dir() / "run-straight";
  const auto s = train_twice_ranked("crashes-once-on-rank-1", straight, marker, {"--max-restarts", "2"});
  BOOST_TEST(s.status == 0, "stderr: " << s.err);
  BOOST_TEST(!contains(s.err, "restart"), s.err);
  // One train record per epoch, and the restarted epochs' losses are those of the straight run.
  const auto restarted = train_losses(run_dir);
  BOOST_TEST_REQUIRE(restarted.size() == 3u);
  for (int e = 0; e < 3; ++e) BOOST_TEST(restarted[static_cast<std::size_t>(e)].first == e + 1);
  BOOST_TEST((restarted == train_losses(straight)));
}

BOOST_AUTO_TEST_CASE(a_crash_every_time_gives_up_after_the_restarts_allowed) {
  // Rank 1 crashes at its 25th read: in the first attempt in epoch 2; the restart resumes at
  // epoch 2 (after epoch 1's checkpoint), writes epoch 2's and crashes in epoch 3.
  const fs::path run_dir = scratch_dir() / "run-gives-up";
  const auto r = train_twice_ranked("crashes-on-rank-1", run_dir, scratch_dir() / "unused", {"--max-restarts", "1"});
  BOOST_TEST(r.status == 1, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(contains(r.err, "kiln: restarting the 2 ranks (restart 1 of 1) from " +
                                 (run_dir / "checkpoints" / "epoch-0001").string() + "\n"),
             r.err);
  BOOST_TEST(contains(r.err, "kiln: error: gave up after 1 restart (--max-restarts 1); the run directory " +
                                 run_dir.string() + " keeps what every attempt wrote\n"),
             r.err);
  BOOST_TEST(fs::is_directory(run_dir / "checkpoints" / "epoch-0002"));
  BOOST_TEST(!fs::exists(run_dir / "checkpoints" / "epoch-0003"));
  // Whichever wrote it -- rank 0 with the error it saw, or the supervisor after stopping rank 0
  // with its own reason -- the run failed after its second epoch.
  const auto status = status_of(run_dir);
  BOOST_TEST(status.at("state").string == "failed");
  BOOST_TEST(status.at("epoch").number == 2);
  BOOST_TEST(!status.at("message").string.empty());
}

BOOST_AUTO_TEST_CASE(no_restart_without_a_checkpoint_to_continue_from) {
  const fs::path run_dir = scratch_dir() / "run-no-checkpoint";
  const auto r = train_twice_ranked("crashes-once-on-rank-1", run_dir, scratch_dir() / "crashed-once-2",
                                    {"--max-restarts", "3", "--set", "checkpoint.every_epochs=0"});
  BOOST_TEST(r.status == 1, "exit status " << r.status << ", stderr: " << r.err);
  BOOST_TEST(contains(r.err, "kiln: not restarting: " + run_dir.string() + " holds no complete checkpoint to continue "
                                                                          "from"),
             r.err);
  BOOST_TEST(!contains(r.err, "kiln: restarting"), r.err);
}

// What torchrun --max-restarts or a Slurm requeue does: the same command again after a failure.
// `--resume if-any` starts the job where the run directory has no checkpoint and continues it
// where it has one (`--resume auto` alone refuses the first start).
BOOST_AUTO_TEST_CASE(resume_if_any_is_one_command_for_a_job_and_its_restart) {
  const fs::path marker = scratch_dir() / "crashed-once-3";
  const fs::path run_dir = scratch_dir() / "run-if-any";
  const std::vector<std::string> same = {"--resume", "if-any"};
  const auto first = train_twice_ranked("crashes-once-on-rank-1", run_dir, marker, same);
  BOOST_TEST(first.status == 1, "stderr: " << first.err);
  BOOST_TEST(fs::is_directory(run_dir / "checkpoints" / "epoch-0001"));
  const auto again = train_twice_ranked("crashes-once-on-rank-1", run_dir, marker, same);
  BOOST_TEST(again.status == 0, "stderr: " << again.err);
  BOOST_TEST(fs::is_directory(run_dir / "checkpoints" / "epoch-0003"));
  const auto losses = train_losses(run_dir);
  BOOST_TEST_REQUIRE(losses.size() == 3u);
  for (int e = 0; e < 3; ++e) BOOST_TEST(losses[static_cast<std::size_t>(e)].first == e + 1);
  std::ifstream log_file(run_dir / "logs" / "rank0.log");
  const std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  BOOST_TEST(contains(log, "--resume if-any: no checkpoint in " + run_dir.string() + ": a fresh run"), log);
  BOOST_TEST(contains(log, "--resume if-any: continuing from " + (run_dir / "checkpoints" / "epoch-0001").string()),
             log);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(resume_if_any_needs_a_named_run_directory) {
  const auto r = run_kiln(scratch_dir(), {"train", "--config", kiln::test::fixture_data_config("crashes-in-read").string(),
                                          "--plugin-path", fixture_dir("crashes-in-read").string(), "--resume",
                                          "if-any"});
  BOOST_TEST(r.status == 1);
  BOOST_TEST(contains(r.err, "--resume if-any continues the run in a named directory when it has a checkpoint"),
             r.err);
}

BOOST_AUTO_TEST_CASE(max_restarts_needs_nproc) {
  const auto r = run_kiln(scratch_dir(), {"train", "--config", kiln::test::fixture_data_config("crashes-in-read").string(),
                                          "--max-restarts", "1"});
  BOOST_TEST(r.status != 0);
  BOOST_TEST(contains(r.err, "--max-restarts restarts the ranks that --nproc starts"), r.err);
}
