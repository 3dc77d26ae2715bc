// The moving average of the weights ([ema]) through the real `kiln` binary, checked against the
// weights the run itself saved: with a checkpoint after every optimizer step, each step's
// model_ema.safetensors must be the previous one moved towards that step's model.safetensors by
// (1 - decay), on the steps every_steps says, and unchanged on the others -- parameters and
// batch-norm statistics alike. Each epoch's "test_ema" record is what `kiln eval --ema` computes
// from the checkpoint, keep_best and early stopping can watch the average's metrics, a resumed
// run continues the average to the same values, and the mistakes a user can make are refused
// naming the key.
#define KILN_TEST_MODULE test_weight_ema
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint_tensors.hpp"
#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = kiln::test::json;
using kiln::test::F32Tensors;
using kiln::test::one_line_error;
using kiln::test::read_f32_safetensors;
using kiln::test::run_kiln;
using kiln::test::slurp;

/// The mlp on 64 synthetic samples (and 32 to evaluate), batch 16: 4 steps an epoch. `extra` is
/// appended.
fs::path mlp_config(const fs::path& dir, const std::string& extra) {
  const fs::path file = dir / "run.toml";
  std::ofstream(file) << "[run]\nepochs = 3\n\n"
                         "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [6]\nnum_classes = 3\n\n"
                         "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 64\n\n"
                         "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 32\nseed = 7\n\n"
                         "[loader]\nbatch = 16\nworkers = 1\n\n"
                         "[optimizer]\nlr = 0.05\n\n"
                         "[log]\nprogress = \"never\"\n\n"
                      << extra;
  return file;
}

/// A ResNet-18 (width 1/8, batch norms with running statistics) on 16 synthetic 32x32 images,
/// batch 4: 4 steps an epoch, a checkpoint after each.
fs::path resnet_config(const fs::path& dir, const std::string& extra) {
  const fs::path file = dir / "run.toml";
  std::ofstream(file) << "[run]\nepochs = 1\n\n[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"resnet\"\ndepth = 18\nwidth = 0.125\nnum_classes = 4\nimage_size = 32\n\n"
                         "[data.train]\ntype = \"synthetic\"\nshape = [3, 32, 32]\nclasses = 4\ncount = 16\n\n"
                         "[loader]\nbatch = 4\nworkers = 1\n\n"
                         "[optimizer]\ntype = \"sgd\"\nlr = 0.1\nmomentum = 0.9\n\n"
                         "[checkpoint]\nevery_epochs = 0\nevery_steps = 1\nkeep = 100\n\n"
                         "[log]\nprogress = \"never\"\n\n"
                      << extra;
  return file;
}

/// The checkpoint directory of global step `step` in a run of `steps_per_epoch` steps an epoch
/// that checkpoints every step (an epoch's last step is written as the epoch's checkpoint).
fs::path step_checkpoint(const fs::path& run, int step, int steps_per_epoch) {
  char name[64];
  if (step % steps_per_epoch == 0) {
    std::snprintf(name, sizeof name, "epoch-%04d", step / steps_per_epoch);
  } else {
    std::snprintf(name, sizeof name, "epoch-%04d-step-%08d", step / steps_per_epoch, step);
  }
  return run / "checkpoints" / name;
}

struct Mismatch {
  double worst = 0;
  std::string where;
};

/// How far `average` is from lerp(previous, weights, w) = previous + w * (weights - previous),
/// relative to the values' scale; every tensor of `average` is compared.
Mismatch lerp_mismatch(const F32Tensors& previous, const F32Tensors& weights, const F32Tensors& average, double w) {
  Mismatch m;
  for (const auto& [name, avg] : average) {
    const auto& prev = previous.at(name);
    const auto& cur = weights.at(name);
    for (std::size_t i = 0; i < avg.size(); ++i) {
      const double want = static_cast<double>(prev[i]) + w * (static_cast<double>(cur[i]) - prev[i]);
      const double scale = std::max({std::abs(want), std::abs(static_cast<double>(prev[i])), 1e-3});
      const double d = std::abs(static_cast<double>(avg[i]) - want) / scale;
      if (!(d <= m.worst)) m = {std::isfinite(d) ? d : INFINITY, name + "[" + std::to_string(i) + "]"};
    }
  }
  return m;
}

/// Whether two tensor sets hold the same names and exactly the same values.
bool identical(const F32Tensors& a, const F32Tensors& b) { return a == b; }

/// The records of `split` in a metrics.jsonl, in order.
std::vector<json::Value> records(const std::string& jsonl, const std::string& split) {
  std::vector<json::Value> out;
  std::istringstream lines(jsonl);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    json::Value v = json::parse(line);
    if (const json::Value* s = v.find("split"); s && s->string == split) out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

/// Trains the mlp for 12 steps with a checkpoint after each and [ema] decay 0.75 every 2 steps
/// (`extra` added to [ema]); checks every step's average against the weights of that step:
/// moved by 1 - decay_of(update number) on even steps, unchanged on odd ones.
void check_every_step(const std::string& name, const std::string& extra, const std::function<double(int)>& decay_of) {
  const fs::path cwd = kiln::test::fresh_workdir(name);
  // every_steps = 2: the average moves after steps 2, 4, ... and holds after 1, 3, ...; so the
  // step-1 checkpoint's average is still the starting weights, which no checkpoint holds otherwise.
  const fs::path cfg = mlp_config(cwd, "[checkpoint]\nevery_epochs = 0\nevery_steps = 1\nkeep = 100\n\n"
                                       "[ema]\ndecay = 0.75\nevery_steps = 2\nevaluate = false\n" + extra);
  const fs::path run = cwd / "run";
  const auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.err.find("weight average (ema): decay 0.75") != std::string::npos, r.err);
  BOOST_TEST(records(slurp(run / "metrics.jsonl"), "test_ema").empty(), "evaluate = false writes no test_ema record");

  F32Tensors previous = read_f32_safetensors(step_checkpoint(run, 1, 4) / "model_ema.safetensors");
  const F32Tensors first_weights = read_f32_safetensors(step_checkpoint(run, 1, 4) / "model.safetensors");
  BOOST_TEST(!identical(previous, first_weights), "after step 1 the average must still be the starting weights");
  for (int step = 2; step <= 12; ++step) {
    const fs::path dir = step_checkpoint(run, step, 4);
    const F32Tensors weights = read_f32_safetensors(dir / "model.safetensors");
    const F32Tensors average = read_f32_safetensors(dir / "model_ema.safetensors");
    BOOST_TEST_REQUIRE(average.size() == weights.size());
    if (step % 2 == 1) {
      BOOST_TEST(identical(average, previous), "step " << step << ": the average moved on a step it should skip");
    } else {
      const Mismatch m = lerp_mismatch(previous, weights, average, 1.0 - decay_of(step / 2));
      BOOST_TEST(m.worst < 1e-6, name << " step " << step << ": " << m.where << " is " << m.worst << " off");
      BOOST_TEST(!identical(average, weights), "step " << step);
    }
    previous = average;
  }
}

BOOST_AUTO_TEST_CASE(each_update_moves_the_average_towards_that_steps_weights_and_skips_the_others) {
  check_every_step("mlp-steps", "", [](int) { return 0.75; });
}

BOOST_AUTO_TEST_CASE(with_warmup_update_n_decays_by_at_most_1_plus_n_over_10_plus_n) {
  // Updates 1..6: 2/11, 3/12, ..., 7/16 -- all below 0.75, so the warmup's decay is every one used.
  check_every_step("mlp-warmup", "warmup = true\n", [](int n) { return std::min(0.75, (1.0 + n) / (10.0 + n)); });
}

BOOST_AUTO_TEST_CASE(batch_norm_statistics_are_averaged_with_the_parameters) {
  const fs::path cwd = kiln::test::fresh_workdir("resnet-steps");
  const fs::path cfg = resnet_config(cwd, "[ema]\ndecay = 0.5\n");
  const fs::path run = cwd / "run";
  const auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  F32Tensors previous = read_f32_safetensors(step_checkpoint(run, 1, 4) / "model_ema.safetensors");
  BOOST_TEST_REQUIRE(previous.count("bn1.running_var") == 1u);
  for (int step = 2; step <= 4; ++step) {
    const fs::path dir = step_checkpoint(run, step, 4);
    const F32Tensors weights = read_f32_safetensors(dir / "model.safetensors");
    const F32Tensors average = read_f32_safetensors(dir / "model_ema.safetensors");
    BOOST_TEST_REQUIRE(average.size() == weights.size());
    const Mismatch m = lerp_mismatch(previous, weights, average, 0.5);
    BOOST_TEST(m.worst < 1e-6, "step " << step << ": " << m.where << " is " << m.worst << " off");
    // The statistics move with the batches, so an average that skipped them would stay behind.
    BOOST_TEST(average.at("bn1.running_mean") != weights.at("bn1.running_mean"));
    previous = average;
  }
}

BOOST_AUTO_TEST_CASE(the_test_ema_records_are_what_kiln_eval_ema_computes_and_keep_best_can_watch_them) {
  const fs::path cwd = kiln::test::fresh_workdir("records");
  const fs::path cfg = mlp_config(cwd, "[checkpoint]\nkeep_best = \"eval_ema_accuracy\"\n\n[ema]\ndecay = 0.9\n");
  const fs::path run = cwd / "run";
  const auto r = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.out.find("|  ema loss ") != std::string::npos, r.out);  // the epoch lines
  BOOST_TEST(r.err.find(", averaged weights ") != std::string::npos, r.err);
  const std::string jsonl = slurp(run / "metrics.jsonl");
  const auto averaged = records(jsonl, "test_ema");
  const auto tested = records(jsonl, "test");
  BOOST_TEST_REQUIRE(averaged.size() == 3u);
  BOOST_TEST_REQUIRE(tested.size() == 3u);
  BOOST_TEST(averaged.back().at("samples").number == 32);
  // The averaged weights lag the trained ones, so the two evaluations differ.
  BOOST_TEST(averaged.back().at("loss").number != tested.back().at("loss").number);
  BOOST_TEST(fs::exists(run / "checkpoints" / "best" / "model_ema.safetensors"));

  const auto with_ema = run_kiln(cwd, {"eval", "--run-dir", run.string(), "--ema", "--json"});
  BOOST_TEST_REQUIRE(with_ema.status == 0, with_ema.err);
  const json::Value e = json::parse(with_ema.out);
  BOOST_TEST(e.at("weights").string == "ema");
  BOOST_TEST(e.at("loss").number == averaged.back().at("loss").number);
  BOOST_TEST(e.at("accuracy").number == averaged.back().at("accuracy").number);
  const auto without = run_kiln(cwd, {"eval", "--run-dir", run.string(), "--json"});
  BOOST_TEST_REQUIRE(without.status == 0, without.err);
  BOOST_TEST(json::parse(without.out).at("loss").number == tested.back().at("loss").number);
  BOOST_TEST(json::parse(without.out).find("weights") == nullptr);

  // The same file serves `[model] init`, as model.safetensors does: a fine-tuning run starts from it.
  const fs::path tuned = cwd / "tuned";
  const auto init = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", tuned.string(), "--set",
                                   "model.init=\"" + (run / "checkpoints" / "epoch-0003" / "model_ema.safetensors").string() +
                                       "\"",
                                   "--set", "run.epochs=1"});
  BOOST_TEST(init.status == 0, init.err);
}

BOOST_AUTO_TEST_CASE(a_resumed_run_continues_the_average_to_the_same_values) {
  const fs::path cwd = kiln::test::fresh_workdir("resume");
  const fs::path cfg = mlp_config(cwd, "[checkpoint]\nkeep = 10\n\n[ema]\ndecay = 0.8\n");
  const fs::path run = cwd / "run";
  const auto straight = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string()});
  BOOST_TEST_REQUIRE(straight.status == 0, straight.err);
  const F32Tensors want = read_f32_safetensors(run / "checkpoints" / "epoch-0003" / "model_ema.safetensors");
  fs::remove_all(run / "checkpoints" / "epoch-0003");
  const auto resumed =
      run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string(), "--resume", "auto"});
  BOOST_TEST_REQUIRE(resumed.status == 0, resumed.err);
  BOOST_TEST(resumed.err.find("holds no") == std::string::npos, resumed.err);
  BOOST_TEST(identical(read_f32_safetensors(run / "checkpoints" / "epoch-0003" / "model_ema.safetensors"), want),
             "the resumed run's average differs from the uninterrupted run's");

  // A damaged average: `--resume auto` passes over its checkpoint, an explicit --resume names it.
  const fs::path newest = run / "checkpoints" / "epoch-0003";
  kiln::test::damage_safetensors(newest / "model_ema.safetensors");
  const std::string refused = one_line_error(run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string(),
                                                            "--resume", newest.string()}));
  BOOST_TEST(refused.find((newest / "model_ema.safetensors").string()) != std::string::npos, refused);
  BOOST_TEST(refused.find("the checkpoint is damaged") != std::string::npos, refused);
  const auto fallback = run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string(), "--resume", "auto"});
  BOOST_TEST_REQUIRE(fallback.status == 0, fallback.err);
  BOOST_TEST(fallback.err.find("--resume auto: skipping damaged checkpoint " + newest.string()) != std::string::npos,
             fallback.err);
  BOOST_TEST(identical(read_f32_safetensors(newest / "model_ema.safetensors"), want));

  // A checkpoint of a run without [ema]: the average starts from the resumed weights, and says so.
  const fs::path plain = cwd / "plain";
  const fs::path plain_cfg = mlp_config(cwd, "");
  BOOST_TEST_REQUIRE(run_kiln(cwd, {"train", "--config", plain_cfg.string(), "--run-dir", plain.string(), "--set",
                                    "run.epochs=1"})
                         .status == 0);
  const auto started = run_kiln(cwd, {"train", "--config", plain_cfg.string(), "--run-dir", plain.string(), "--resume",
                                      "auto", "--set", "ema.decay=0.8", "--set", "run.epochs=2"});
  BOOST_TEST_REQUIRE(started.status == 0, started.err);
  BOOST_TEST(started.err.find("holds no model_ema.safetensors (written without [ema]); the average starts from its "
                              "weights") != std::string::npos,
             started.err);
  BOOST_TEST(fs::exists(plain / "checkpoints" / "epoch-0002" / "model_ema.safetensors"));
}

BOOST_AUTO_TEST_CASE(mistakes_are_refused_naming_the_key) {
  const fs::path cwd = kiln::test::fresh_workdir("refusals");
  const fs::path run = cwd / "run";
  auto refused = [&](const std::string& extra) {
    const fs::path cfg = mlp_config(cwd, extra);
    const std::string msg = one_line_error(run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string()}));
    BOOST_TEST(!fs::exists(run), extra);
    return msg;
  };
  std::string msg = refused("[ema]\nevery_steps = 4\n");
  BOOST_TEST(msg.find("ema.every_steps (") == 0u, msg);
  BOOST_TEST(msg.find("has no effect: the moving average is off (ema.decay is 0)") != std::string::npos, msg);
  msg = refused("[ema]\ndecay = 1.0\n");
  BOOST_TEST(msg.find("decay") != std::string::npos, msg);
  msg = refused("[checkpoint]\nkeep_best = \"eval_ema_loss\"\n");
  BOOST_TEST(msg.find("checkpoint.keep_best (") == 0u, msg);
  BOOST_TEST(msg.find("is a metric of the averaged weights, and this run evaluates none") != std::string::npos, msg);
  msg = refused("[early_stop]\nmetric = \"eval_ema_accuracy\"\n\n[ema]\ndecay = 0.9\nevaluate = false\n");
  BOOST_TEST(msg.find("early_stop.metric (") == 0u, msg);
  BOOST_TEST(msg.find("watch eval_accuracy") != std::string::npos, msg);

  // --ema on a checkpoint without averaged weights: said before anything is built.
  const fs::path cfg = mlp_config(cwd, "");
  BOOST_TEST_REQUIRE(
      run_kiln(cwd, {"train", "--config", cfg.string(), "--run-dir", run.string(), "--set", "run.epochs=1"}).status == 0);
  msg = one_line_error(run_kiln(cwd, {"eval", "--run-dir", run.string(), "--ema"}));
  BOOST_TEST(msg.find("--ema: ") == 0u, msg);
  BOOST_TEST(msg.find("has no model_ema.safetensors") != std::string::npos, msg);
}
