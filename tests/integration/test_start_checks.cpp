// Part of test_train_errors: a start that fails leaves nothing behind. Every check that does
// not need the run directory (config, plugin factories, model/data agreement, loader sizes)
// runs before it is created; a failure after it (here: a checkpoint that does not fit the
// model, found while the trainer is built) removes what the start added and nothing else.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <set>

#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::run_kiln;

const std::string kSample = std::string(KILN_SOURCE_DIR) + "/samples/fashion-mnist-mlp.toml";
// A parameter only the mlp itself rejects (its schema's ranges cannot see the total): a layer of
// 2^40 units needs petabytes.
const std::string kHugeLayer = "model.hidden=[1099511627776]";

using kiln::test::one_line_error;

/// A fresh empty working directory for one test.
fs::path workdir(const std::string& name) { return kiln::test::fresh_workdir(name); }

std::set<fs::path> entries_under(const fs::path& dir) {
  std::set<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(e.path());
  return out;
}

BOOST_AUTO_TEST_CASE(rejected_plugin_parameter_leaves_no_run_directory) {
  const fs::path cwd = workdir("hidden-huge");
  const fs::path run_dir = cwd / "run";
  const std::string msg = one_line_error(
      run_kiln(cwd, {"train", "--config", kSample, "--run-dir", run_dir.string(), "--set", kHugeLayer}));
  BOOST_TEST(msg.rfind("model plugin 'mlp' (", 0) == 0u, msg);
  const std::string tail = " bytes of physical memory; use fewer or narrower layers";
  BOOST_TEST((msg.size() > tail.size() && msg.compare(msg.size() - tail.size(), tail.size(), tail) == 0), msg);
  BOOST_TEST(!fs::exists(run_dir), "the failed start left " << run_dir);
}

// Without --run-dir the default runs/<timestamp> (and runs/ itself) must not appear either.
BOOST_AUTO_TEST_CASE(rejected_plugin_parameter_leaves_no_default_runs_folder) {
  const fs::path cwd = workdir("hidden-huge-default");
  const std::string msg =
      one_line_error(run_kiln(cwd, {"train", "--config", kSample, "--set", kHugeLayer}));
  BOOST_TEST(msg.find("more than this machine's") != std::string::npos, msg);
  BOOST_TEST(fs::is_empty(cwd), "the failed start left files in the working directory");
}

/// A config for the mlp on the `synthetic` data source, small enough to train in a moment.
fs::path synthetic_config(const fs::path& dir, const std::string& model, const std::string& extra = "") {
  const fs::path file = dir / "run.toml";
  std::ofstream(file) << "[run]\nepochs = 1\n\n"
                         "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"mlp\"\nin_features = 8\n"
                      << model
                      << "\n\n[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 64\n\n"
                         "[loader]\nbatch = 16\nworkers = 1\n\n"
                         "[checkpoint]\nevery_epochs = 1\n\n"
                         "[log]\nprogress = \"never\"\n"
                      << extra;
  return file;
}

BOOST_AUTO_TEST_CASE(model_and_data_disagreeing_leave_no_run_directory) {
  const fs::path cwd = workdir("classes");
  const fs::path run_dir = cwd / "run";
  const fs::path config = synthetic_config(cwd, "hidden = [4]\nnum_classes = 2");
  const std::string msg = one_line_error(run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string()}));
  BOOST_TEST(msg == "[data.train] has 3 classes but the model outputs only 2; set model.num_classes");
  BOOST_TEST(!fs::exists(run_dir));
}

BOOST_AUTO_TEST_CASE(batch_larger_than_the_data_leaves_no_run_directory) {
  const fs::path cwd = workdir("batch");
  const fs::path run_dir = cwd / "run";
  const fs::path config = synthetic_config(cwd, "hidden = [4]\nnum_classes = 3");
  const std::string msg = one_line_error(
      run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string(), "--set", "loader.batch=128"}));
  BOOST_TEST(msg.find("128") != std::string::npos, msg);
  BOOST_TEST(!fs::exists(run_dir));
}

// --resume into an existing run whose checkpoint does not fit the model: the error comes while
// the trainer loads the checkpoint, after the run directory is in use. The directory must hold
// exactly what it held before (no config.resume-1.toml), and the old run stays intact.
// --resume-ignore-config gets past the run-identity check (which would refuse the changed
// model.hidden before the directory is touched) so that the load itself fails; its warning is
// silenced (log.level = "error") for the one-line check.
BOOST_AUTO_TEST_CASE(failed_resume_removes_only_what_it_added) {
  const fs::path cwd = workdir("resume");
  const fs::path run_dir = cwd / "run";
  const fs::path config = synthetic_config(cwd, "hidden = [4]\nnum_classes = 3");
  const auto first = run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string()});
  BOOST_TEST_REQUIRE(first.status == 0, first.err);
  const std::set<fs::path> before = entries_under(run_dir);
  const std::string metrics = kiln::test::slurp(run_dir / "metrics.jsonl");
  BOOST_TEST_REQUIRE(!metrics.empty());

  const auto r = run_kiln(cwd, {"train", "--config", config.string(), "--run-dir", run_dir.string(), "--resume",
                                "auto", "--resume-ignore-config", "--set", "run.epochs=2", "--set",
                                "model.hidden=[5]", "--set", "log.level=error"});
  const std::string msg = one_line_error(r);
  BOOST_TEST(msg.find("tensor 'layers.0.weight' is f32(4, 8) but the model's is f32(5, 8)") != std::string::npos, msg);
  BOOST_TEST((entries_under(run_dir) == before), "the failed resume added or removed entries");
  BOOST_TEST(kiln::test::slurp(run_dir / "metrics.jsonl") == metrics);
}

}  // namespace
