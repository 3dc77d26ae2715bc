// `kiln train --dry-run` through the real binary: a few optimizer steps, as many eval batches and
// one checkpoint (where the run writes any) run, the summary says how many of how many and what a
// whole epoch and the run would take, and
// the run directory is left exactly as it was -- gone when the dry run made it (folders above it
// too), byte for byte the same when it was a run being resumed. A config a real run refuses is
// refused the same way, and on two ranks every rank steps and nothing is kept.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::one_line_error;
using kiln::test::run_kiln;
using kiln::test::slurp;

fs::path workdir(const std::string& name) { return kiln::test::fresh_workdir("dry-run-" + name); }

/// The mlp on 64 synthetic samples, batch 16: 4 optimizer steps an epoch; 32 eval samples: 2
/// eval batches.
fs::path config(const fs::path& dir) {
  const fs::path file = dir / "run.toml";
  std::ofstream(file) << "[run]\nepochs = 5\n\n"
                         "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [6]\nnum_classes = 3\n\n"
                         "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 64\n\n"
                         "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 32\nseed = 7\n\n"
                         "[loader]\nbatch = 16\nworkers = 1\n\n"
                         "[log]\nprogress = \"never\"\n";
  return file;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

/// Every file under `dir` with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? slurp(e.path()) : "<dir>";
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dry_run)

BOOST_AUTO_TEST_CASE(a_dry_run_trains_a_few_steps_says_what_the_run_would_take_and_keeps_nothing) {
  const fs::path cwd = workdir("fresh");
  const fs::path run = cwd / "runs" / "first";  // runs/ does not exist either
  const auto r = run_kiln(cwd, {"train", "--config", config(cwd).string(), "--run-dir", run.string(), "--dry-run-steps",
                                "2"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(has(r.err, "dry run: 2 of 4 optimizer steps of epoch 1 in "), r.err);
  BOOST_TEST(has(r.err, "; train loss "), r.err);
  BOOST_TEST(has(r.err, "dry run: 2 of 2 eval batches in "), r.err);
  BOOST_TEST(has(r.err, "dry run: a checkpoint of "), r.err);  // every_epochs = 1: the run writes some
  BOOST_TEST(has(r.err, "dry run: at that pace an epoch takes about "), r.err);
  BOOST_TEST(has(r.err, "the 5 epochs to train about "), r.err);
  BOOST_TEST(has(r.err, "peak memory "), r.err);
  BOOST_TEST(has(r.err, "dry run: nothing kept in " + run.string()), r.err);
  BOOST_TEST(!has(r.err, "epoch   1/5"), r.err);  // no epoch line: a dry run reports no epoch
  BOOST_TEST(!fs::exists(cwd / "runs"));

  // The default is 3 steps; with accumulation a step is a group of micro-batches (2 of 4 here),
  // and the steps of a shorter epoch are all of it.
  const auto acc = run_kiln(cwd, {"train", "--config", config(cwd).string(), "--run-dir", run.string(), "--dry-run",
                                  "--set", "loader.accumulate_steps=2"});
  BOOST_TEST_REQUIRE(acc.status == 0, acc.err);
  BOOST_TEST(has(acc.err, "dry run: 2 of 2 optimizer steps of epoch 1 in "), acc.err);
  BOOST_TEST(!fs::exists(cwd / "runs"));

  // A run that writes no checkpoints: the dry run writes none either.
  const auto none = run_kiln(cwd, {"train", "--config", config(cwd).string(), "--run-dir", run.string(), "--dry-run",
                                   "--set", "checkpoint.every_epochs=0"});
  BOOST_TEST_REQUIRE(none.status == 0, none.err);
  BOOST_TEST(!has(none.err, "a checkpoint of"), none.err);
  BOOST_TEST(!fs::exists(cwd / "runs"));
}

BOOST_AUTO_TEST_CASE(a_dry_run_of_a_resumed_run_leaves_its_directory_byte_for_byte) {
  const fs::path cwd = workdir("resume");
  const fs::path run = cwd / "run";
  const auto first = run_kiln(cwd, {"train", "--config", config(cwd).string(), "--run-dir", run.string(), "--set",
                                    "run.epochs=2"});
  BOOST_TEST_REQUIRE(first.status == 0, first.err);
  const auto before = snapshot(run);
  BOOST_TEST_REQUIRE(before.count("metrics.jsonl") == 1u);
  const auto dry = run_kiln(cwd, {"train", "--config", config(cwd).string(), "--run-dir", run.string(), "--resume",
                                  "auto", "--dry-run"});
  BOOST_TEST_REQUIRE(dry.status == 0, dry.err);
  BOOST_TEST(has(dry.err, "resumed from "), dry.err);
  BOOST_TEST(has(dry.err, "dry run: 3 of 4 optimizer steps of epoch 3 in "), dry.err);
  BOOST_TEST(has(dry.err, "the 3 epochs to train about "), dry.err);
  BOOST_TEST(has(dry.err, "dry run: a checkpoint of "), dry.err);  // written beside the run's own, then removed
  BOOST_TEST((snapshot(run) == before), "the dry run changed the run directory it resumed");
}

BOOST_AUTO_TEST_CASE(a_dry_run_refuses_what_a_real_run_refuses_and_a_step_count_below_one) {
  const fs::path cwd = workdir("refused");
  const std::string msg = one_line_error(run_kiln(cwd, {"train", "--config", config(cwd).string(), "--run-dir",
                                                        (cwd / "run").string(), "--dry-run", "--set", "model.hidden=[0]"}));
  BOOST_TEST(has(msg, "[model] hidden[0] = 0 is out of range"), msg);
  BOOST_TEST(!fs::exists(cwd / "run"));
  const auto zero = run_kiln(cwd, {"train", "--config", config(cwd).string(), "--dry-run-steps", "0"});
  BOOST_TEST(zero.status != 0);
  BOOST_TEST(has(zero.err, "--dry-run-steps must be at least 1"), zero.err);
}

BOOST_AUTO_TEST_CASE(a_dry_run_on_two_ranks_steps_every_rank_and_keeps_nothing) {
#if KILN_TEST_HAVE_GLOO
  const fs::path cwd = workdir("two-ranks");
  const fs::path run = cwd / "run";
  const auto r = run_kiln(cwd, {"train", "--config", config(cwd).string(), "--run-dir", run.string(), "--nproc", "2",
                                "--set", "comm.type=gloo", "--set", "loader.batch=8", "--dry-run"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(has(r.err, "agree     the 2 ranks run the same"), r.err);
  BOOST_TEST(has(r.err, "dry run: 3 of 4 optimizer steps of epoch 1 in "), r.err);
  BOOST_TEST(has(r.err, "dry run: nothing kept in "), r.err);
  BOOST_TEST(!fs::exists(run));
#else
  BOOST_TEST_MESSAGE("skipped: the gloo communicator is not built");
#endif
}

BOOST_AUTO_TEST_SUITE_END()
