// Part of test_train_errors: what a hostile or careless user types must end in one clear line and
// exit status 1, never a crash, a hang or a run that "succeeds" on garbage (issue 11):
// sizes whose products overflow, values outside their schema's range, a diverging run (and weights
// an update overflowed, which are never checkpointed), too many local ranks, a config that is not
// a regular file, and a model larger than the machine.
#include <boost/test/unit_test.hpp>
#include <sys/stat.h>

#include <fstream>

#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::run_kiln;

const std::string kSample = std::string(KILN_SOURCE_DIR) + "/samples/fashion-mnist-mlp.toml";

using kiln::test::one_line_error;

fs::path workdir(const std::string& name) { return kiln::test::fresh_workdir("hostile-" + name); }

/// The mlp on `synthetic` data: 64 samples of 8 features, batch 16 (4 steps an epoch).
fs::path synthetic_config(const fs::path& dir) {
  const fs::path file = dir / "run.toml";
  std::ofstream(file) << "[run]\nepochs = 1\n\n"
                         "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [4]\nnum_classes = 3\n\n"
                         "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 64\n\n"
                         "[loader]\nbatch = 16\nworkers = 1\n\n"
                         "[checkpoint]\nevery_epochs = 1\n\n"
                         "[log]\nprogress = \"never\"\n";
  return file;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

BOOST_AUTO_TEST_CASE(a_class_count_whose_parameter_count_overflows_is_refused) {
  const fs::path cwd = workdir("classes");
  const fs::path run_dir = cwd / "run";
  const std::string msg = one_line_error(run_kiln(cwd, {"train", "--config", kSample, "--run-dir", run_dir.string(),
                                                        "--set", "model.num_classes=4611686018427387904"}));
  BOOST_TEST(msg.rfind("model plugin 'mlp' (", 0) == 0u, msg);
  BOOST_TEST(contains(msg, "the mlp's parameter count from model.in_features, model.hidden and model.num_classes ("),
             msg);
  BOOST_TEST(contains(msg, "model.num_classes (--set model.num_classes)"), msg);
  BOOST_TEST(contains(msg, "= 128 x 4611686018427387904 overflows a 64-bit size; use fewer or narrower layers"), msg);
  BOOST_TEST(!fs::exists(run_dir));
}

BOOST_AUTO_TEST_CASE(a_batch_whose_buffer_size_overflows_is_refused) {
  const fs::path cwd = workdir("batch");
  const fs::path run_dir = cwd / "run";
  const std::string msg = one_line_error(run_kiln(
      cwd, {"train", "--config", kSample, "--run-dir", run_dir.string(), "--set", "loader.batch=4611686018427387904",
            "--set", "loader.last_batch=\"partial\""}));
  BOOST_TEST(msg == "loader.batch (--set loader.batch) x one data.train sample f32(784) = 4611686018427387904 x 784 "
                    "overflows a 64-bit size; use a batch that fits in memory",
             msg);
  BOOST_TEST(!fs::exists(run_dir));
}

BOOST_AUTO_TEST_CASE(values_outside_their_range_are_refused_before_the_run_directory) {
  const fs::path cwd = workdir("ranges");
  const fs::path run_dir = cwd / "run";
  auto error_with = [&](const std::string& set) {
    return one_line_error(run_kiln(cwd, {"train", "--config", kSample, "--run-dir", run_dir.string(), "--set", set}));
  };
  BOOST_TEST(error_with("optimizer.lr=inf") ==
             "--set optimizer.lr: [optimizer] lr = inf is out of range: it must be a finite number");
  BOOST_TEST(error_with("optimizer.weight_decay=nan") ==
             "--set optimizer.weight_decay: [optimizer] weight_decay = nan is out of range: it must be a finite "
             "number");
  BOOST_TEST(error_with("optimizer.eps=inf") ==
             "--set optimizer.eps: [optimizer] eps = inf is out of range: it must be a finite number");
  BOOST_TEST(error_with("optimizer.eps=0.0") == "--set optimizer.eps: [optimizer] eps = 0 is out of range: it must be > 0");
  const std::string milestones = one_line_error(run_kiln(cwd, {"train", "--config", kSample, "--run-dir",
                                                               run_dir.string(), "--set", "schedule.type=\"step\"",
                                                               "--set", "schedule.milestones=[-1]"}));
  BOOST_TEST(milestones == "--set schedule.milestones: [schedule] milestones[0] = -1 is out of range: it must be >= 0",
             milestones);
  // A key of another schedule type is unknown here, not ignored (the sample's schedule is constant).
  const std::string gamma = error_with("schedule.gamma=0.5");
  BOOST_TEST(gamma.find("unknown key 'gamma' in [schedule]") != std::string::npos, gamma);
  BOOST_TEST(error_with("model.dropout=1.0") ==
             "--set model.dropout: [model] dropout = 1 is out of range: it must be in [0, 1)");
  BOOST_TEST(error_with("model.hidden=[0]") ==
             "--set model.hidden: [model] hidden[0] = 0 is out of range: it must be >= 1");
  BOOST_TEST(!fs::exists(run_dir));
}

BOOST_AUTO_TEST_CASE(a_diverging_run_stops_naming_the_step_and_keeps_earlier_checkpoints) {
  const fs::path cwd = workdir("diverge");
  const fs::path run_dir = cwd / "run";
  const fs::path config = synthetic_config(cwd);
  const auto first = run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string()});
  BOOST_TEST_REQUIRE(first.status == 0, first.err);
  BOOST_TEST_REQUIRE(fs::exists(run_dir / "checkpoints" / "epoch-0001" / "model.safetensors"));

  // Epoch 2 with an absurd rate: the weights blow up and the loss turns non-finite.
  const std::string msg = one_line_error(
      run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string(), "--resume", "auto", "--set",
                     "run.epochs=2", "--set", "optimizer.lr=1e30", "--set", "log.level=\"warn\""}));
  BOOST_TEST(msg.rfind("epoch 2/2 step ", 0) == 0u, msg);
  BOOST_TEST(contains(msg, "/4: the training loss is "), msg);
  BOOST_TEST(contains(msg, "; the run diverged, so it stops here and writes no checkpoint for this epoch"), msg);
  BOOST_TEST(contains(msg, "Lower optimizer.lr (now 1e+30)"), msg);
  BOOST_TEST(!fs::exists(run_dir / "checkpoints" / "epoch-0002"));
  BOOST_TEST(fs::exists(run_dir / "checkpoints" / "epoch-0001" / "model.safetensors"));
}

// The loss of a step is computed before its update: an update that overflows the weights at an
// epoch's last step leaves that step's loss finite, and the epoch's checkpoint would hold inf.
// Epochs of one step (16 samples, batch 16) and a rate of 1e38 make exactly that happen.
BOOST_AUTO_TEST_CASE(weights_an_update_overflowed_are_not_checkpointed) {
  const fs::path cwd = workdir("overflowed-weights");
  const fs::path run_dir = cwd / "run";
  const fs::path config = synthetic_config(cwd);
  const auto first = run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string(), "--set",
                                    "data.train.count=16"});
  BOOST_TEST_REQUIRE(first.status == 0, first.err);
  const std::string msg = one_line_error(run_kiln(
      cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string(), "--resume", "auto", "--set",
            "data.train.count=16", "--set", "run.epochs=2", "--set", "optimizer.lr=1e38", "--set", "log.level=\"warn\""}));
  BOOST_TEST(msg.rfind("not writing checkpoint " + (run_dir / "checkpoints" / "epoch-0002").string() +
                           ": parameter 'layers.0.weight' holds inf or NaN, so the run diverged",
                       0) == 0u,
             msg);
  BOOST_TEST(contains(msg, "the checkpoints already written are kept"), msg);
  BOOST_TEST(!fs::exists(run_dir / "checkpoints" / "epoch-0002"));
  BOOST_TEST(fs::exists(run_dir / "checkpoints" / "epoch-0001" / "model.safetensors"));
}

BOOST_AUTO_TEST_CASE(a_sparser_loss_check_names_the_window_of_steps) {
  const fs::path cwd = workdir("diverge-window");
  const fs::path config = synthetic_config(cwd);
  // Checked every 3rd step of 4: the first check is at step 3 and covers steps 1-3.
  const std::string msg = one_line_error(
      run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", (cwd / "run").string(), "--set",
                     "optimizer.lr=1e30", "--set", "run.loss_check_every=3", "--set", "log.level=\"warn\""}));
  BOOST_TEST(msg.rfind("epoch 1/1 steps 1-3/4: the training loss is ", 0) == 0u, msg);
  BOOST_TEST(!fs::exists(cwd / "run" / "checkpoints" / "epoch-0001"));
}

BOOST_AUTO_TEST_CASE(a_diverging_run_trains_on_when_the_stop_is_turned_off) {
  const fs::path cwd = workdir("diverge-off");
  const fs::path config = synthetic_config(cwd);
  const auto r = run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", (cwd / "run").string(), "--set",
                                "optimizer.lr=1e30", "--set", "run.stop_on_nonfinite_loss=false"});
  BOOST_TEST(r.status == 0, r.err);
  BOOST_TEST(fs::exists(cwd / "run" / "checkpoints" / "epoch-0001" / "model.safetensors"));
}

BOOST_AUTO_TEST_CASE(an_fp16_loss_scale_below_one_is_warned_about) {
  // Allowed, but f16 gradients then underflow to 0 and the run learns nothing without a skipped
  // step or any other line saying so.
  const fs::path cwd = workdir("fp16-scale");
  const fs::path config = synthetic_config(cwd);
  const auto r = run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", (cwd / "run").string(), "--set",
                                "precision.type=fp16", "--set", "precision.min_scale=1e-8", "--dry-run"});
  BOOST_TEST(r.status == 0, r.err);
  BOOST_TEST(contains(r.err, "warning: precision.min_scale (--set precision.min_scale) = 1e-08 is below 1: the loss "
                             "scale shrinks the f16 gradients, and those below 6e-8 become 0"),
             r.err);
  BOOST_TEST(!contains(r.err, "precision.initial_scale"), r.err);  // the default 65536 is not
}

BOOST_AUTO_TEST_CASE(too_many_local_ranks_are_refused) {
  const fs::path cwd = workdir("nproc");
  const std::string msg = one_line_error(run_kiln(cwd, {"train", "--config", kSample, "--nproc", "100000"}));
  BOOST_TEST(msg.rfind("--nproc 100000 is more local ranks than this machine can run: at most ", 0) == 0u, msg);
  BOOST_TEST(contains(msg, "never more than 1024); use fewer ranks"), msg);
  BOOST_TEST(fs::is_empty(cwd));
}

BOOST_AUTO_TEST_CASE(a_fifo_as_config_is_refused_without_blocking) {
  const fs::path cwd = workdir("fifo");
  const fs::path fifo = cwd / "run.toml";
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string msg = one_line_error(run_kiln(cwd, {"train", "--config", fifo.string()}));
  BOOST_TEST(msg == "config file '" + fifo.string() + "' is a FIFO (named pipe); give the path of a TOML file", msg);
}

BOOST_AUTO_TEST_CASE(a_model_larger_than_the_machine_is_refused_before_it_is_built) {
  const fs::path cwd = workdir("memory");
  // 784 x 2^40 weights: 14 PB with gradients and Adam's moments, on no machine this runs on.
  const std::string msg = one_line_error(
      run_kiln(cwd, {"train", "--config", kSample, "--set", "model.hidden=[1099511627776]"}));
  BOOST_TEST(msg.rfind("model plugin 'mlp' (", 0) == 0u, msg);
  BOOST_TEST(contains(msg, "give 874111744081930 parameters, which need 13985787905310880 bytes for their f32 weights, "
                           "gradients and Adam's two moments, more than this machine's "),
             msg);
  BOOST_TEST(contains(msg, " bytes of physical memory; use fewer or narrower layers"), msg);
  BOOST_TEST(fs::is_empty(cwd));
}

BOOST_AUTO_TEST_CASE(plugins_show_prints_each_range) {
  const auto r = run_kiln(workdir("show"), {"plugins", "show", "mlp"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(contains(r.out, "  dropout      float, default 0.2, in [0, 1), finite\n"), r.out);
  BOOST_TEST(contains(r.out, "  hidden       integer list, default [128], >= 1\n"), r.out);
  BOOST_TEST(contains(r.out, "  num_classes  integer, default 10, >= 2\n"), r.out);
}

}  // namespace
