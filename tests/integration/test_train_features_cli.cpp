// The training features through the real `kiln` binary: early stopping on an eval metric
// without an eval split is refused before anything is written, naming the file and line; an
// early-stopped run ends normally saying why, with its last checkpoint, and resumed it trains no
// further (nor does a finished run: "nothing to train", not a made-up accuracy); a run cut short after a
// mid-epoch checkpoint (every_steps) continues with `--resume auto` to the same weights, bit for
// bit; and the best checkpoint is kept apart from rotation. The test split's top-5 accuracy can
// be watched where the run counts it (more than 5 classes), and watching it elsewhere is refused
// naming the key, with nothing left behind. The plateau schedule lowers the rate the epoch after
// its metric stalls, says so, and a run resumed from a checkpoint after a reduction trains on at
// the lowered rate, to the uninterrupted run's weights. Runs started together never share a run
// directory, and a start in one a run holds is refused.
#define KILN_TEST_MODULE test_train_features_cli
#include "kiln_test_main.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::one_line_error;
using kiln::test::run_kiln;
using kiln::test::slurp;

fs::path workdir(const std::string& name) { return kiln::test::fresh_workdir(name); }

/// The mlp on 64 synthetic samples, batch 16: 4 steps an epoch. `extra` is appended.
fs::path config(const fs::path& dir, const std::string& extra) {
  const fs::path file = dir / "run.toml";
  std::ofstream(file) << "[run]\nepochs = 3\n\n"
                         "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [6]\nnum_classes = 3\n\n"
                         "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 64\n\n"
                         "[loader]\nbatch = 16\nworkers = 1\n\n"
                         "[log]\nprogress = \"never\"\n\n"
                      << extra;
  return file;
}

/// Every "lr" of the train records in a metrics.jsonl, in order.
std::vector<double> train_rates(const std::string& jsonl) {
  std::vector<double> out;
  std::istringstream lines(jsonl);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("\"lr\": ");
    if (line.find("\"split\": \"train\"") == std::string::npos || at == std::string::npos) continue;
    out.push_back(std::stod(line.substr(at + 6)));
  }
  return out;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(early_stopping_on_an_eval_metric_without_an_eval_split_is_refused_naming_the_line) {
  const fs::path cwd = workdir("no-eval");
  const fs::path cfg = config(cwd, "[early_stop]\nmetric = \"eval_loss\"\n");
  const std::string msg =
      one_line_error(run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string()}));
  BOOST_TEST(msg.find("early_stop.metric (" + cfg.string() + ":") == 0u, msg);
  BOOST_TEST(msg.find("needs an eval split, and this run has none") != std::string::npos, msg);
  BOOST_TEST(!fs::exists(cwd / "run"));

  const std::string clip = one_line_error(run_kiln(
      cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string(), "--set", "optimizer.clip_grad_norm=-1"}));
  BOOST_TEST(clip.find("clip_grad_norm") != std::string::npos, clip);
  BOOST_TEST(!fs::exists(cwd / "run"));
}

BOOST_AUTO_TEST_CASE(an_early_stopped_run_ends_normally_with_its_last_checkpoint) {
  const fs::path cwd = workdir("early-stop");
  // The training loss falls, so watched for a maximum it stops improving after epoch 1.
  const fs::path cfg = config(cwd, "[checkpoint]\nevery_epochs = 5\n\n"
                                   "[early_stop]\nmetric = \"train_loss\"\nmode = \"max\"\npatience = 1\n");
  const auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string(), "--set",
                                "run.epochs=10", "--set", "optimizer.lr=0.01"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.err.find("early stopping: train_loss (max) has not improved by more than 0 for 1 epoch") !=
                 std::string::npos,
             r.err);
  BOOST_TEST(r.err.find("stopped after epoch 2 of 10") != std::string::npos, r.err);
  BOOST_TEST(count_of(r.err, "early stopping: ") == 1u, r.err);  // said once
  BOOST_TEST(fs::exists(cwd / "run" / "checkpoints" / "epoch-0002" / "model.safetensors"));
  const std::string metrics = slurp(cwd / "run" / "metrics.jsonl");
  BOOST_TEST(count_of(metrics, "\"split\": \"train\"") == 2u);

  // Relaunched (a restart loop, --resume if-any), it trains no further, as the uninterrupted run
  // did not, and says why; with a longer patience it goes on.
  const std::vector<std::string> resume = {"train",        "--config",      cfg.string(), "--run-dir",
                                           (cwd / "run").string(), "--resume", "auto",   "--set",
                                           "run.epochs=10", "--set",        "optimizer.lr=0.01"};
  const auto again = run_kiln(cwd, resume);
  BOOST_TEST_REQUIRE(again.status == 0, again.err);
  BOOST_TEST(again.err.find("done: nothing to train: the run stopped early after epoch 2 (early stopping: train_loss "
                            "(max) has not improved by more than 0 for 1 epoch") != std::string::npos,
             again.err);
  BOOST_TEST(again.err.find("checkpoints/epoch-0002 is that epoch's checkpoint; raise early_stop.patience") !=
                 std::string::npos,
             again.err);
  BOOST_TEST(slurp(cwd / "run" / "metrics.jsonl") == metrics);
  std::vector<std::string> longer = resume;
  longer.insert(longer.end(), {"--set", "early_stop.patience=2"});
  const auto on = run_kiln(cwd, longer);
  BOOST_TEST_REQUIRE(on.status == 0, on.err);
  BOOST_TEST(on.err.find("stopped after epoch 3 of 10") != std::string::npos, on.err);
}

/// The epochs of the "test" records of a metrics.jsonl, in order.
std::vector<int> test_epochs(const std::string& jsonl) {
  std::vector<int> out;
  std::istringstream lines(jsonl);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("\"epoch\": ");
    if (line.find("\"split\": \"test\"") == std::string::npos || at == std::string::npos) continue;
    out.push_back(std::stoi(line.substr(at + 9)));
  }
  return out;
}

// run.eval_every_epochs: evaluations after every N epochs and the last; a rule watching an eval
// metric counts evaluations; the epoch early stopping ends a run with is evaluated; the key is
// refused where there is nothing to evaluate.
BOOST_AUTO_TEST_CASE(eval_every_few_epochs_evaluates_those_the_last_and_the_one_a_run_stops_after) {
  const fs::path cwd = workdir("eval-every");
  const std::string eval = "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 16\nseed = 7\n\n";
  const fs::path cfg = config(cwd, eval);
  const std::vector<std::string> base = {"train", "--config", cfg.string(), "--set", "run.epochs=5", "--set",
                                         "run.eval_every_epochs=2"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--run-dir", (cwd / "plain").string()});
  auto r = run_kiln(cwd, args);
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST((test_epochs(slurp(cwd / "plain" / "metrics.jsonl")) == std::vector<int>{2, 4, 5}));

  // Watching eval_loss with a margin nothing beats: the reading after epoch 2 sets the best, the
  // one after epoch 4 fails to beat it, and patience 1 stops the run there.
  args = base;
  args.insert(args.end(), {"--run-dir", (cwd / "stop-eval").string(), "--set", "early_stop.metric=eval_loss", "--set",
                           "early_stop.min_delta=100", "--set", "early_stop.patience=1"});
  r = run_kiln(cwd, args);
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.err.find("stopped after epoch 4 of 5") != std::string::npos, r.err);
  BOOST_TEST((test_epochs(slurp(cwd / "stop-eval" / "metrics.jsonl")) == std::vector<int>{2, 4}));

  // Watching the training loss for a maximum: it stops after epoch 2, which is evaluated although
  // eval_every_epochs = 3 would skip it, so the run's final test accuracy is of its last weights.
  args = base;
  args.back() = "run.eval_every_epochs=3";
  args.insert(args.end(), {"--run-dir", (cwd / "stop-train").string(), "--set", "early_stop.metric=train_loss",
                           "--set", "early_stop.mode=max", "--set", "early_stop.patience=1", "--set",
                           "optimizer.lr=0.01"});
  r = run_kiln(cwd, args);
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.err.find("stopped after epoch 2 of 5") != std::string::npos, r.err);
  BOOST_TEST((test_epochs(slurp(cwd / "stop-train" / "metrics.jsonl")) == std::vector<int>{2}));

  const fs::path no_eval = config(cwd, "");
  const std::string msg = one_line_error(run_kiln(cwd, {"train", "--config", no_eval.string(), "--run-dir",
                                                        (cwd / "none").string(), "--set", "run.eval_every_epochs=2"}));
  BOOST_TEST(msg == "run.eval_every_epochs (--set run.eval_every_epochs) = 2 has no effect: this run evaluates "
                    "nothing (it has no [data.eval] table); add one or remove the key",
             msg);
  BOOST_TEST(!fs::exists(cwd / "none"));
}

// The plateau schedule and keep_best on an eval metric read it only after evaluated epochs: with
// eval_every_epochs = 2 the readings come after epochs 2, 4 and 6, so patience 1 lowers the rate
// after epoch 4 (the reading after 2 sets the best, the one after 4 fails to beat it by the
// margin); keep_best is offered those epochs only, so its checkpoint is one of 2, 4, 6. Reading an
// eval metric after an epoch without evaluation would stop the run with an error instead.
BOOST_AUTO_TEST_CASE(the_plateau_and_keep_best_read_eval_metrics_only_after_evaluated_epochs) {
  const fs::path cwd = workdir("plateau-eval-every");
  const fs::path cfg = config(cwd, "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 16\nseed = 7\n\n"
                                   "[checkpoint]\nkeep_best = \"eval_loss\"\n\n"
                                   "[schedule]\ntype = \"plateau\"\nmetric = \"eval_loss\"\npatience = 1\n"
                                   "factor = 0.5\nmin_delta = 100\n");
  const fs::path run = cwd / "run";
  const auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string(), "--set", "run.epochs=6",
                                "--set", "run.eval_every_epochs=2", "--set", "optimizer.lr=0.01"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const std::vector<double> rates = train_rates(slurp(run / "metrics.jsonl"));
  const std::vector<double> want = {0.01, 0.01, 0.01, 0.01, 0.005, 0.005};
  BOOST_TEST(rates == want, boost::test_tools::per_element());
  BOOST_TEST(r.err.find("epoch 4: lr 0.01 -> 0.005: eval_loss (min) has not improved by more than 100 for 1 epoch") !=
                 std::string::npos,
             r.err);
  // keep_best offered only evaluated epochs: its checkpoint records one of 2, 4, 6.
  const std::string best = slurp(run / "checkpoints" / "best" / "model.safetensors");
  const auto at = best.find("\"best.epoch\":\"");
  BOOST_TEST_REQUIRE(at != std::string::npos);
  const char epoch = best[at + 14];
  BOOST_TEST((epoch == '2' || epoch == '4' || epoch == '6'), "best.epoch " << epoch);
}

BOOST_AUTO_TEST_CASE(resuming_a_finished_run_trains_nothing_and_says_so) {
  const fs::path cwd = workdir("finished");
  const fs::path cfg = config(cwd, "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 16\nseed = 7\n");
  const std::vector<std::string> train = {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string()};
  BOOST_TEST_REQUIRE(run_kiln(cwd, train).status == 0);
  const std::string metrics = slurp(cwd / "run" / "metrics.jsonl");
  std::vector<std::string> resume = train;
  resume.insert(resume.end(), {"--resume", "auto"});
  const auto r = run_kiln(cwd, resume);
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  // Not "final test accuracy 0.0000", which no epoch of this run measured.
  BOOST_TEST(r.err.find("done: nothing to train: " + (cwd / "run" / "checkpoints" / "epoch-0003").string() +
                        " was written after epoch 3, and run.epochs = 3; raise it to train further (--set "
                        "run.epochs=4)") != std::string::npos,
             r.err);
  BOOST_TEST(r.err.find("final test accuracy") == std::string::npos, r.err);
  BOOST_TEST(slurp(cwd / "run" / "metrics.jsonl") == metrics);
  const std::string status = slurp(cwd / "run" / "status.json");
  BOOST_TEST(status.starts_with("{\"state\": \"completed\", \"epoch\": 3, \"epochs\": 3, \"step\": 12, \"message\": "
                                "\"nothing to train: "),
             status);
}

// status.json through a run: "completed" with the final test accuracy the log prints; "failed"
// with the error when the loop stops on a non-finite loss, counting the epochs done before it.
BOOST_AUTO_TEST_CASE(status_json_says_how_a_run_ended) {
  const fs::path cwd = workdir("status");
  const fs::path cfg = config(cwd, "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 16\nseed = 7\n");
  auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "done").string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  std::string status = slurp(cwd / "done" / "status.json");
  BOOST_TEST(status.starts_with("{\"state\": \"completed\", \"epoch\": 3, \"epochs\": 3, \"step\": 12, \"message\": \"\", "
                                "\"final_test_accuracy\": 0."),
             status);
  const auto at = r.err.find("final test accuracy ");
  BOOST_TEST_REQUIRE(at != std::string::npos, r.err);
  const double logged = std::stod(r.err.substr(at + 20, 6));
  const double written = std::stod(status.substr(status.find("\"final_test_accuracy\": ") + 23));
  BOOST_TEST(std::abs(written - logged) < 1e-4);

  r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "diverged").string(), "--set",
                     "optimizer.lr=1e30"});
  BOOST_TEST_REQUIRE(r.status == 1, r.err);
  status = slurp(cwd / "diverged" / "status.json");
  BOOST_TEST(status.starts_with("{\"state\": \"failed\", \"epoch\": "), status);
  BOOST_TEST(status.find("the training loss is") != std::string::npos, status);

  // SIGTERM to a lone run (as Slurm's scancel sends; a shell's background job ignores SIGINT):
  // "interrupted", written before the signal ends the process as it would have.
  const fs::path stopped = cwd / "stopped";
  const std::string script = fmt::format(
      "cd {cwd} || exit 1; env -u KILN_PLUGIN_PATH {kiln} train --config {cfg} --run-dir {run} --set run.epochs=1000000 "
      ">{run}.out 2>{run}.err & pid=$!; "
      "for i in $(seq 1200); do grep -qs '\"epoch\": [1-9]' {run}/status.json && break; sleep 0.05; done; "
      "kill -TERM $pid; for i in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done; "
      "kill -KILL $pid 2>/dev/null; wait $pid; echo $? > {run}.rc",  // 137: it outlived SIGTERM by 30 s
      fmt::arg("cwd", cwd.string()), fmt::arg("kiln", std::string(KILN_BINARY_DIR) + "/bin/kiln"),
      fmt::arg("cfg", cfg.string()), fmt::arg("run", stopped.string()));
  std::ofstream(cwd / "stop.sh") << script << "\n";
  BOOST_TEST_REQUIRE(std::system(("bash " + (cwd / "stop.sh").string()).c_str()) == 0);
  BOOST_TEST(slurp(fs::path(stopped.string() + ".rc")) == "143\n");  // 128 + SIGTERM: ended by the signal
  status = slurp(stopped / "status.json");
  BOOST_TEST(status.starts_with("{\"state\": \"interrupted\", \"epoch\": "), status);
  BOOST_TEST(status.find("\"message\": \"received SIGTERM during epoch ") != std::string::npos, status);

  // `kiln runs` over these: one line each, oldest first; a "running" file whose process is gone
  // from this host reads "ended?".
  fs::create_directories(cwd / "vanished");
  fs::copy_file(cwd / "done" / "config.toml", cwd / "vanished" / "config.toml");
  std::string gone = slurp(cwd / "stopped" / "status.json");
  gone.replace(gone.find("\"interrupted\""), 13, "\"running\"");
  gone.replace(gone.find("\"pid\": ") + 7, gone.find(',', gone.find("\"pid\": ")) - gone.find("\"pid\": ") - 7,
               "2147483646");  // above pid_max: no such process
  gone.replace(gone.find("\"updated\": ") + 11, gone.find('}', gone.find("\"updated\": ")) - gone.find("\"updated\": ") - 11,
               "4000000000.0");  // the newest: the last line
  std::ofstream(cwd / "vanished" / "status.json") << gone;
  r = run_kiln(cwd, {"runs", cwd.string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  std::vector<std::string> lines;
  std::istringstream rows(r.out);
  for (std::string line; std::getline(rows, line);) lines.push_back(line);
  BOOST_TEST_REQUIRE(lines.size() == 5u, r.out);
  BOOST_TEST(lines[0].starts_with("RUN "), r.out);
  BOOST_TEST(lines[1].starts_with("done "), r.out);
  BOOST_TEST(lines[1].find(" completed ") != std::string::npos, r.out);
  BOOST_TEST(lines[1].find(" 3/3 ") != std::string::npos, r.out);
  BOOST_TEST(lines[1].find(" mlp ") != std::string::npos, r.out);
  BOOST_TEST(lines[1].find(" synthetic ") != std::string::npos, r.out);
  BOOST_TEST(lines[2].starts_with("diverged "), r.out);
  BOOST_TEST(lines[2].find(" failed ") != std::string::npos, r.out);
  BOOST_TEST(lines[2].find("the training loss is") != std::string::npos, r.out);
  BOOST_TEST(lines[3].starts_with("stopped "), r.out);
  BOOST_TEST(lines[3].find(" interrupted ") != std::string::npos, r.out);
  BOOST_TEST(lines[4].starts_with("vanished "), r.out);
  BOOST_TEST(lines[4].find(" ended? ") != std::string::npos, r.out);
  const auto json = run_kiln(cwd, {"runs", cwd.string(), "--json"});
  BOOST_TEST(json.out.starts_with("[{\"run_dir\": "), json.out);
  BOOST_TEST(json.out.find("\"state\": \"ended?\"") != std::string::npos, json.out);
}

// configuration.md lets the optimizer change on resume; its state then no longer fits. That was
// "has tensor 'exp_avg.head.bias' that this model does not; was it written by another model?";
// now the optimizer starts afresh, with a warning, and the run continues from the checkpoint.
BOOST_AUTO_TEST_CASE(resuming_with_another_optimizer_starts_its_state_afresh) {
  const fs::path cwd = workdir("other-optimizer");
  const fs::path cfg = config(cwd, "");
  auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string(), "--set",
                          "run.epochs=2"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string(), "--resume", "auto",
                     "--set", "optimizer.type=sgd", "--set", "optimizer.momentum=0.9"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.err.find((cwd / "run" / "checkpoints" / "epoch-0002" / "trainer.safetensors").string() +
                        " holds optimizer state exp_avg, exp_avg_sq where sgd(momentum=0.9, ") != std::string::npos,
             r.err);
  BOOST_TEST(r.err.find(") keeps momentum_buffer: the optimizer changed since the checkpoint, so it starts afresh") !=
                 std::string::npos,
             r.err);
  BOOST_TEST(r.err.find("resumed from " + (cwd / "run" / "checkpoints" / "epoch-0002").string()) != std::string::npos,
             r.err);
  BOOST_TEST(count_of(slurp(cwd / "run" / "metrics.jsonl"), "\"split\": \"train\"") == 3u);
}

// --resume-ignore-config is for an intended change such as the batch, but a position inside an
// epoch counts batches of the old size: resumed at batch 8 it trained samples twice, at batch 32
// it called the intact checkpoint damaged. Refused, naming the item and both values.
BOOST_AUTO_TEST_CASE(a_mid_epoch_checkpoint_cannot_resume_with_another_batch) {
  const fs::path cwd = workdir("mid-epoch-batch");
  const fs::path cfg = config(cwd, "[checkpoint]\nevery_epochs = 0\nevery_steps = 3\n");
  auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string(), "--set",
                          "run.epochs=1"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const fs::path mid = cwd / "run" / "checkpoints" / "epoch-0000-step-00000003";
  BOOST_TEST_REQUIRE(fs::exists(mid / "trainer.safetensors"));
  const std::string metrics = slurp(cwd / "run" / "metrics.jsonl");
  r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string(), "--resume",
                     mid.string(), "--resume-ignore-config", "--set", "loader.batch=8", "--set", "run.epochs=2"});
  BOOST_TEST(one_line_error(r) ==
             "--resume " + mid.string() + ": the checkpoint was written 3 steps into epoch 1, and loader.batch "
             "differs from it (checkpoint was written with loader.batch = 16, this run has 8); --resume-ignore-config "
             "cannot carry a position within an epoch to another shape of epoch: resume from the checkpoint of an "
             "epoch's end, or with the checkpoint's loader.batch");
  BOOST_TEST(slurp(cwd / "run" / "metrics.jsonl") == metrics);
}

// `kiln runs` over a folder that holds more than runs: folders without a config.toml and a
// dangling link are passed over (they ended the listing with "cannot list"), a status.json that is
// a named pipe reads as none (it hung), and a hand-edited one shows sensibly: a time past any
// calendar as "-", a pid no process can have as "ended?", a message's newline and terminal
// escape as spaces, and a long message cut between UTF-8 characters.
BOOST_AUTO_TEST_CASE(kiln_runs_passes_over_what_is_not_a_run_and_shows_odd_status_files_sensibly) {
  const fs::path cwd = workdir("odd-runs");
  const fs::path only_others = cwd / "others";
  fs::create_directories(only_others / "archive");
  fs::create_symlink("/nonexistent", only_others / "dangling");
  auto r = run_kiln(cwd, {"runs", only_others.string()});
  BOOST_TEST(r.status == 0, r.err);
  BOOST_TEST(r.out == "no run directories in " + only_others.string() + " (a run directory holds a config.toml)\n",
             r.out);

  const fs::path runs = cwd / "runs";
  fs::create_directories(runs / "archive");
  const fs::path cfg = config(cwd, "");
  for (const char* name : {"odd", "piped"}) {
    fs::create_directories(runs / name);
    fs::copy_file(cfg, runs / name / "config.toml");
  }
  char host[256] = {};
  BOOST_REQUIRE(::gethostname(host, sizeof host - 1) == 0);  // this host: the pid is checked here
  std::string message = "line1\nline2\x1b[31mRED ";
  for (int i = 0; i < 60; ++i) message += "\xc3\xa9";  // é
  std::ofstream(runs / "odd" / "status.json")
      << "{\"state\": \"running\", \"epoch\": 1, \"epochs\": 3, \"step\": 4, \"message\": \""
      << "line1\\nline2\\u001b[31mRED " << message.substr(message.size() - 120)
      << "\", \"final_test_accuracy\": null, \"pid\": 4294967297, \"host\": \"" << host
      << "\", \"started\": 1e300, \"updated\": 1e300}\n";
  BOOST_REQUIRE(::mkfifo((runs / "piped" / "status.json").c_str(), 0600) == 0);
  r = run_kiln(cwd, {"runs", runs.string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  std::vector<std::string> lines;
  std::istringstream rows(r.out);
  for (std::string line; std::getline(rows, line);) lines.push_back(line);
  BOOST_TEST_REQUIRE(lines.size() == 3u, r.out);
  BOOST_TEST(lines[1].starts_with("piped "), r.out);  // no status: ordered by the folder's time, first
  BOOST_TEST(lines[1].find(" no status.json ") != std::string::npos, r.out);
  BOOST_TEST(lines[2].starts_with("odd "), r.out);
  BOOST_TEST(lines[2].find(" ended? ") != std::string::npos, r.out);
  BOOST_TEST(lines[2].find(" 1/3 ") != std::string::npos, r.out);
  // UPDATED is "-", padded to the other row's "YYYY-mm-dd HH:MM"; then the note on one line.
  BOOST_TEST(lines[2].find(" -" + std::string(17, ' ') + "line1 line2 [31mRED ") != std::string::npos, r.out);
  BOOST_TEST(lines[2].ends_with("\xc3\xa9..."), r.out);  // a whole é before the cut
}

// Two starts never share a run directory: three runs of a sweep started together with the
// default folder get three (each with its own config), and a second start in a folder a run
// holds is refused naming it, before it writes anything, while the first trains on.
BOOST_AUTO_TEST_CASE(runs_started_together_get_their_own_directories_and_a_held_one_is_refused) {
  const fs::path cwd = workdir("claims");
  const fs::path cfg = config(cwd, "");
  const std::string kiln = std::string(KILN_BINARY_DIR) + "/bin/kiln";
  std::string sweep = fmt::format("cd {} || exit 1; ", cwd.string());
  for (const char* lr : {"0.001", "0.002", "0.003"}) {
    sweep += fmt::format("env -u KILN_PLUGIN_PATH {} train --config {} --set optimizer.lr={} >lr{}.out 2>&1 & pids=\"$pids $!\"; ",
                         kiln, cfg.string(), lr, lr);
  }
  sweep += "fail=0; for pid in $pids; do wait $pid || fail=1; done; exit $fail";
  std::ofstream(cwd / "sweep.sh") << sweep << "\n";
  BOOST_TEST_REQUIRE(std::system(("bash " + (cwd / "sweep.sh").string()).c_str()) == 0);
  std::multiset<long> rates;  // in thousandths: config.toml writes 0.003 as 0.0030000000000000001
  for (const auto& run : fs::directory_iterator(cwd / "runs")) {
    const std::string config_toml = slurp(run.path() / "config.toml");
    const auto at = config_toml.find("\nlr = ");
    BOOST_TEST_REQUIRE(at != std::string::npos, config_toml);
    rates.insert(std::lround(std::stod(config_toml.substr(at + 6)) * 1000));
    BOOST_TEST(count_of(slurp(run.path() / "metrics.jsonl"), "\"split\": \"train\"") == 3u);
  }
  BOOST_TEST((rates == std::multiset<long>{1, 2, 3}));

  // The same under --nproc, whose supervisor chooses the name for its ranks: made at once, and
  // removed again when a failed start leaves it empty.
  const fs::path jobs = cwd / "jobs";
  fs::create_directories(jobs);
  std::string two_jobs = fmt::format("cd {} || exit 1; ", jobs.string());
  for (const char* lr : {"0.001", "0.002"}) {
    two_jobs += fmt::format("env -u KILN_PLUGIN_PATH {} train --config {} --nproc 2 --set comm.type=gloo --set "
                            "optimizer.lr={} >lr{}.out 2>&1 & pids=\"$pids $!\"; ",
                            kiln, cfg.string(), lr, lr);
  }
  two_jobs += "fail=0; for pid in $pids; do wait $pid || fail=1; done; "
              "env -u KILN_PLUGIN_PATH " + kiln + " train --config " + cfg.string() +
              " --nproc 2 --set comm.type=gloo --set model.hidden=[-1] >bad.out 2>&1 && fail=1; exit $fail";
  std::ofstream(jobs / "jobs.sh") << two_jobs << "\n";
  BOOST_TEST_REQUIRE(std::system(("bash " + (jobs / "jobs.sh").string()).c_str()) == 0);
  std::size_t job_dirs = 0;
  for (const auto& run : fs::directory_iterator(jobs / "runs")) {
    BOOST_TEST(count_of(slurp(run.path() / "metrics.jsonl"), "\"split\": \"train\"") == 3u, run.path());
    ++job_dirs;
  }
  BOOST_TEST(job_dirs == 2u);  // the failed start's folder is gone

  const fs::path held = cwd / "held";
  const std::string script = fmt::format(
      "cd {cwd} || exit 1; env -u KILN_PLUGIN_PATH {kiln} train --config {cfg} --run-dir {run} --set run.epochs=1000000 "
      ">{run}.out 2>{run}.err & pid=$!; "
      "for i in $(seq 1200); do grep -qs '\"epoch\": [1-9]' {run}/status.json && break; sleep 0.05; done; "
      "env -u KILN_PLUGIN_PATH {kiln} train --config {cfg} --run-dir {run} --resume auto >second.out 2>second.err; "
      "echo $? > second.rc; kill -0 $pid && echo alive > first.alive; "
      "kill -TERM $pid; for i in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done; "
      "kill -KILL $pid 2>/dev/null; wait $pid; echo $? > {run}.rc",
      fmt::arg("cwd", cwd.string()), fmt::arg("kiln", kiln), fmt::arg("cfg", cfg.string()),
      fmt::arg("run", held.string()));
  std::ofstream(cwd / "held.sh") << script << "\n";
  BOOST_TEST_REQUIRE(std::system(("bash " + (cwd / "held.sh").string()).c_str()) == 0);
  BOOST_TEST(slurp(cwd / "second.rc") == "1\n");
  BOOST_TEST(slurp(cwd / "first.alive") == "alive\n");  // refused while it ran, and it ran on
  const std::string err = slurp(cwd / "second.err");
  BOOST_TEST(err.find("kiln: error: run directory " + held.string() + " is in use by another kiln train (pid ") !=
                 std::string::npos,
             err);
  BOOST_TEST(err.find("its status.json says running, ") != std::string::npos, err);
  BOOST_TEST(!fs::exists(held / "config.resume-1.toml"));  // the second start wrote nothing
  BOOST_TEST(slurp(fs::path(held.string() + ".rc")) == "143\n");  // the holder ended by the SIGTERM, as usual
}

BOOST_AUTO_TEST_CASE(early_stopping_on_the_top5_accuracy_reads_it_each_epoch) {
  const fs::path cwd = workdir("top5");
  // Ten classes, so each test record has accuracy_top5. No accuracy improves by more than 1, so
  // with min_delta = 1 the run stops after its second epoch -- and only if it read a value both
  // times (an epoch without one is an error).
  const fs::path cfg = config(cwd, "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 10\ncount = 32\nseed = 7\n\n"
                                   "[early_stop]\nmetric = \"eval_accuracy_top5\"\npatience = 1\nmin_delta = 1.0\n");
  const auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string(), "--set",
                                "model.num_classes=10", "--set", "data.train.classes=10"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.err.find("early stopping: eval_accuracy_top5 (max) has not improved by more than 1 for 1 epoch") !=
                 std::string::npos,
             r.err);
  BOOST_TEST(r.err.find("stopped after epoch 2 of 3") != std::string::npos, r.err);
  BOOST_TEST(count_of(slurp(cwd / "run" / "metrics.jsonl"), "\"accuracy_top5\": ") == 2u);
  BOOST_TEST(r.err.find("top-5 ") != std::string::npos, r.err);  // in the epoch lines and the last line
}

BOOST_AUTO_TEST_CASE(watching_a_top5_the_run_cannot_count_is_refused_naming_the_key) {
  const fs::path cwd = workdir("top5-3");
  // Three classes: every label is among the top 5, so the run counts no top-5 accuracy.
  const fs::path cfg = config(cwd, "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 32\n\n"
                                   "[checkpoint]\nkeep_best = \"eval_accuracy_top5\"\n");
  const std::string msg =
      one_line_error(run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", (cwd / "run").string()}));
  BOOST_TEST(msg.find("checkpoint.keep_best (" + cfg.string() + ":") == 0u, msg);
  BOOST_TEST(msg.find("\"eval_accuracy_top5\" cannot be counted in this run: the model has 3 classes, and top-5 "
                      "needs more than 5") != std::string::npos,
             msg);
  BOOST_TEST(!fs::exists(cwd / "run"));
}

BOOST_AUTO_TEST_CASE(resume_auto_from_a_mid_epoch_checkpoint_reaches_the_same_weights) {
  const fs::path cwd = workdir("mid-epoch");
  // Steps 3, 6, 9 fall inside epochs; step 12 is the last step of epoch 3.
  const fs::path cfg = config(cwd, "[checkpoint]\nevery_epochs = 0\nevery_steps = 3\nkeep = 10\n"
                                   "keep_best = \"train_loss\"\n");
  const fs::path run = cwd / "run";
  const auto straight = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string(), "--dump-params",
                                       (cwd / "straight.bin").string(), "--set", "model.dropout=0.3"});
  BOOST_TEST_REQUIRE(straight.status == 0, straight.err);
  const fs::path ckpts = run / "checkpoints";
  for (const char* name : {"epoch-0000-step-00000003", "epoch-0001-step-00000006", "epoch-0002-step-00000009",
                           "epoch-0003", "best"}) {
    BOOST_TEST(fs::exists(ckpts / name / "trainer.safetensors"), name);
  }
  // As if the run had died after its step-9 checkpoint: --resume auto takes the newest one,
  // 1 step into epoch 3, and not `best`.
  fs::remove_all(ckpts / "epoch-0003");
  const auto resumed = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string(), "--resume", "auto",
                                      "--dump-params", (cwd / "resumed.bin").string(), "--set", "model.dropout=0.3"});
  BOOST_TEST_REQUIRE(resumed.status == 0, resumed.err);
  BOOST_TEST(resumed.err.find("2 epochs done and 1 steps of epoch 3, step 9") != std::string::npos, resumed.err);
  const std::string a = slurp(cwd / "straight.bin"), b = slurp(cwd / "resumed.bin");
  BOOST_TEST_REQUIRE(!a.empty());
  BOOST_TEST((a == b), "the resumed run's weights differ from the uninterrupted run's");
}

BOOST_AUTO_TEST_CASE(the_plateau_schedule_lowers_the_rate_and_a_resumed_run_keeps_it_lowered) {
  const fs::path cwd = workdir("plateau");
  // The training loss falls, so watched for a maximum it stops improving after epoch 1: with
  // patience 1 each later epoch halves the rate the next one trains at.
  const fs::path cfg = config(cwd, "[checkpoint]\nkeep = 10\n\n"
                                   "[schedule]\ntype = \"plateau\"\nmetric = \"train_loss\"\nmode = \"max\"\n"
                                   "patience = 1\nfactor = 0.5\n");
  const fs::path run = cwd / "run";
  const std::vector<std::string> common = {"train", "--config", cfg.string(), "--run-dir", run.string(), "--set",
                                           "run.epochs=4", "--set", "optimizer.lr=0.01"};
  auto args = common;
  args.insert(args.end(), {"--dump-params", (cwd / "straight.bin").string()});
  const auto straight = run_kiln(cwd, args);
  BOOST_TEST_REQUIRE(straight.status == 0, straight.err);
  const std::vector<double> rates = train_rates(slurp(run / "metrics.jsonl"));
  const std::vector<double> want = {0.01, 0.01, 0.005, 0.0025};
  BOOST_TEST(rates == want, boost::test_tools::per_element());
  BOOST_TEST(straight.err.find("epoch 2: lr 0.01 -> 0.005: train_loss (max) has not improved by more than 0.0001 for "
                               "1 epoch; best ") != std::string::npos,
             straight.err);
  BOOST_TEST(straight.err.find("lr schedule plateau on train_loss (max): x0.5 after 1 epoch") != std::string::npos,
             straight.err);

  // As if the run had died during epoch 3: the epoch-2 checkpoint holds the halved rate. A
  // resume that started again at 0.01 would train epoch 3 differently.
  fs::remove_all(run / "checkpoints" / "epoch-0003");
  fs::remove_all(run / "checkpoints" / "epoch-0004");
  args = common;
  args.insert(args.end(), {"--resume", "auto", "--dump-params", (cwd / "resumed.bin").string()});
  const auto resumed = run_kiln(cwd, args);
  BOOST_TEST_REQUIRE(resumed.status == 0, resumed.err);
  BOOST_TEST(resumed.err.find("lr schedule: rate 0.005 after 1 reduction on a plateau (from the checkpoint)") !=
                 std::string::npos,
             resumed.err);
  const std::string a = slurp(cwd / "straight.bin"), b = slurp(cwd / "resumed.bin");
  BOOST_TEST_REQUIRE(!a.empty());
  BOOST_TEST((a == b), "the resumed run's weights differ from the uninterrupted run's");
  BOOST_TEST(train_rates(slurp(run / "metrics.jsonl")) == want, boost::test_tools::per_element());
}
