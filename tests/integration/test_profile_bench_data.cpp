// `kiln train --profile` and `kiln bench-data` through the real binary, on the mlp over the
// synthetic source (8 features, 3 classes, 256 samples, batch 16: 16 steps per epoch).
//   - --profile: the table's ops and call counts are exactly those of the model's training step
//     (derived below from the mlp's layers and the trainer's step), times the steps profiled
//     after the warm-up; profile.json and profile.txt are written into the run directory, and
//     the evaluation pass is not counted. No figure is checked against a time.
//   - bench-data --json: one object with the pipeline's settings and the batches and samples it
//     drew, one epoch by default and across epochs with -n; mistakes are one-line errors.
#define KILN_TEST_MODULE test_profile_bench_data
#include "kiln_test_main.hpp"

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::KilnResult;
using kiln::test::json::Value;

KilnResult run(const std::vector<std::string>& args) { return kiln::test::run_kiln(kiln::test::scratch_dir(), args); }

constexpr int kStepsPerEpoch = 16;  // 256 samples / batch 16

/// A config of the mlp (8 -> 16 -> 3, dropout 0.2) on synthetic data, Adam, fp32, with an eval split.
fs::path write_config(const std::string& name) {
  const fs::path config = kiln::test::scratch_dir() / (name + ".toml");
  std::ofstream(config) << "[run]\nepochs = 1\n\n"
                           "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                           "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [16]\nnum_classes = 3\n\n"
                           "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 256\n\n"
                           "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 64\nseed = 7\n\n"
                           "[loader]\nbatch = 16\nworkers = 2\nprefetch = 3\n\n"
                           "[log]\nprogress = \"never\"\n";
  return config;
}

/// calls per training step of each (op, dtype) row for this model and trainer:
///   to_device: the batch's inputs and labels;
///   forward: Linear 1 (matmul, bias fused), ReLU, dropout, Linear 2 (matmul);
///   loss: softmax cross-entropy forward and backward;
///   backward: Linear 2 (dW matmul, bias_grad, dX matmul), dropout, ReLU, Linear 1 (dW matmul,
///   bias_grad; no dX: the model's input needs no gradient);
///   then one fused Adam update and one zero-fill over the single parameter/gradient arena, and
///   the loss check's copy of the running [loss, correct] sums to the host.
const std::map<std::string, std::int64_t> kPerStep = {
    {"to_device f32", 1},          {"to_device i32", 1},
    {"matmul f32", 5},             {"activation_forward f32", 1},
    {"activation_backward f32", 1}, {"dropout_forward f32", 1},
    {"dropout_backward f32", 1},   {"bias_grad f32", 2},
    {"softmax_xent_forward f32", 1}, {"softmax_xent_backward f32", 1},
    {"adam_update f32", 1},        {"fill f32", 1},
    {"copy f32", 1},
};

}  // namespace

BOOST_AUTO_TEST_CASE(profile_counts_every_op_of_the_profiled_steps) {
  const fs::path config = write_config("profile");
  const fs::path dir = kiln::test::scratch_dir() / "profile-run";
  const KilnResult r = run({"train", "--config", config.string(), "--run-dir", dir.string(), "--profile",
                             "--profile-warmup", "3"});
  BOOST_TEST_REQUIRE(r.status == 0, "kiln train --profile failed: " << r.err);
  constexpr std::int64_t profiled = kStepsPerEpoch - 3;

  const Value p = kiln::test::json::parse(kiln::test::slurp(dir / "profile.json"));
  BOOST_TEST(p.at("steps").number == profiled);
  BOOST_TEST(p.at("warmup_steps").number == 3);
  BOOST_TEST(p.at("device").string.find("ISA") != std::string::npos, "device names the ISA: " << p.at("device").string);
  std::map<std::string, std::int64_t> calls;
  double share_sum = 0;
  for (const Value& op : p.at("ops").items) {
    const std::string key = op.at("op").string + " " + op.at("dtype").string;
    calls[key] = static_cast<std::int64_t>(op.at("calls").number);
    share_sum += op.at("share").number;
    // matmul has a FLOP count, so a rate; an op without one says null rather than 0.
    if (op.at("op").string == "matmul") BOOST_TEST((op.at("gflops").kind == Value::Kind::number));
    if (op.at("op").string == "fill") BOOST_TEST((op.at("gflops").kind == Value::Kind::null));
  }
  std::map<std::string, std::int64_t> expected;
  for (const auto& [key, per_step] : kPerStep) expected[key] = per_step * profiled;
  BOOST_TEST(calls == expected, "profiled rows differ from the mlp's step");
  BOOST_TEST(share_sum <= 1.0 + 1e-9, "ops cannot take more than the steps they ran in");

  // The table: printed on stdout and saved; one line per row, heading first.
  const std::string table = kiln::test::slurp(dir / "profile.txt");
  BOOST_TEST(r.out.find(table) != std::string::npos, "the table is printed as saved");
  BOOST_TEST(table.find("op ") != std::string::npos);
  BOOST_TEST(table.find("(outside backend ops)") != std::string::npos);
  for (const auto& [key, n] : expected) {
    const std::string op = key.substr(0, key.find(' '));
    BOOST_TEST(table.find(op) != std::string::npos, op << " missing from the table");
  }
}

BOOST_AUTO_TEST_CASE(profile_with_accumulation_counts_optimizer_steps) {
  // The step timer restarted at every micro-step but stopped only after a group's last: "8
  // steps" of 16 micro-steps each timed as one micro-step, and shares of 280-1968%.
  const fs::path config = write_config("profile-accumulate");
  const fs::path dir = kiln::test::scratch_dir() / "profile-accumulate-run";
  // --profile-warmup alone implies --profile (it was ignored without it).
  const KilnResult r = run({"train", "--config", config.string(), "--run-dir", dir.string(), "--profile-warmup", "1",
                            "--set", "loader.accumulate_steps=4"});
  BOOST_TEST_REQUIRE(r.status == 0, "kiln train --profile failed: " << r.err);
  constexpr std::int64_t groups = kStepsPerEpoch / 4;
  const Value p = kiln::test::json::parse(kiln::test::slurp(dir / "profile.json"));
  BOOST_TEST(p.at("steps").number == groups - 1);
  double share_sum = 0;
  for (const Value& op : p.at("ops").items) {
    share_sum += op.at("share").number;
    // Four micro-steps' matmuls per optimizer step.
    if (op.at("op").string == "matmul") BOOST_TEST(op.at("calls").number == 4 * 5 * (groups - 1));
  }
  BOOST_TEST(share_sum <= 1.0 + 1e-9, "ops cannot take more than the steps they ran in");
}

BOOST_AUTO_TEST_CASE(a_run_without_profile_writes_no_profile) {
  const fs::path config = write_config("plain");
  const fs::path dir = kiln::test::scratch_dir() / "plain-run";
  const KilnResult r = run({"train", "--config", config.string(), "--run-dir", dir.string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(!fs::exists(dir / "profile.json"));
}

BOOST_AUTO_TEST_CASE(bench_data_json_reports_one_epoch_of_the_pipeline) {
  const fs::path config = write_config("bench-data");
  const KilnResult r = run({"bench-data", "--config", config.string(), "--json"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value v = kiln::test::json::parse(r.out);
  BOOST_TEST(v.at("source").string == "synthetic");
  BOOST_TEST(v.at("batch").number == 16);
  BOOST_TEST(v.at("workers").number == 2);
  BOOST_TEST(v.at("prefetch").number == 3);
  BOOST_TEST(v.at("warmup_batches").number == 1);
  BOOST_TEST(v.at("batches").number == kStepsPerEpoch);
  BOOST_TEST(v.at("samples").number == 256);
  for (const char* key : {"wall_s", "cpu_s", "worker_busy_s", "samples_per_s", "samples_per_cpu_s"}) {
    BOOST_TEST((v.at(key).kind == Value::Kind::number), key);
    BOOST_TEST(v.at(key).number >= 0, key);
  }
}

BOOST_AUTO_TEST_CASE(bench_data_draws_across_epochs_and_honours_overrides) {
  const fs::path config = write_config("bench-data-n");
  const KilnResult r = run({"bench-data", "--config", config.string(), "--json", "-n", "40", "-w", "0", "--set",
                             "loader.batch=32", "--set", "loader.workers=1"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value v = kiln::test::json::parse(r.out);
  BOOST_TEST(v.at("batches").number == 40);  // 8 batches of 32 per epoch: five epochs
  BOOST_TEST(v.at("samples").number == 40 * 32);
  BOOST_TEST(v.at("workers").number == 1);
  BOOST_TEST(v.at("warmup_batches").number == 0);
  // The plain form says the same in words.
  const KilnResult plain = run({"bench-data", "--config", config.string(), "-n", "4"});
  BOOST_TEST_REQUIRE(plain.status == 0, plain.err);
  BOOST_TEST(plain.out.find("64 samples in") != std::string::npos, plain.out);
  BOOST_TEST(plain.out.find("samples per CPU-second") != std::string::npos, plain.out);
}

// bench-data validated its own list of the core's tables and left [early_stop] out, so every
// training config with early stopping was refused as "unknown table [early_stop]". All commands
// now validate the core's tables through one function (train::validate_core_tables).
BOOST_AUTO_TEST_CASE(bench_data_takes_every_table_a_training_run_takes) {
  const fs::path config = write_config("bench-data-full");
  std::ofstream(config, std::ios::app) << "\n[early_stop]\nmetric = \"eval.loss\"\npatience = 2\n\n"
                                          "[checkpoint]\nevery_epochs = 1\n\n[schedule]\ntype = \"cosine\"\n\n"
                                          "[optimizer]\ntype = \"sgd\"\nmomentum = 0.9\n";
  const KilnResult r = run({"bench-data", "--config", config.string(), "-n", "2", "-w", "0"});
  BOOST_TEST(r.status == 0, r.err);
  // The same with [model]'s host keys (a fine-tuning config), which the model plugin's own schema
  // lacks: they were "unknown key 'freeze' in [model]".
  const KilnResult ft = run({"bench-data", "--config", config.string(), "-n", "2", "-w", "0", "--set",
                             "model.freeze=[\"layers.0.*\"]", "--set", "model.init_strict=false"});
  BOOST_TEST(ft.status == 0, ft.err);
}

BOOST_AUTO_TEST_CASE(bench_data_mistakes_are_one_line_errors) {
  const fs::path config = write_config("bench-data-bad");
  const std::string line = kiln::test::one_line_error(
      run({"bench-data", "--config", config.string(), "--set", "loader.wrokers=2"}));
  BOOST_TEST(line.find("wrokers") != std::string::npos, line);
  const KilnResult usage = run({"bench-data", "--config", config.string(), "-n", "0"});
  BOOST_TEST(usage.status == 2, usage.err);
}
