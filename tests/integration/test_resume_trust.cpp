// Resuming through the real `kiln` binary when checkpoints cannot be trusted blindly: a damaged
// newest checkpoint (auto falls back, an explicit one is refused naming the tensor), another
// run's checkpoint (refused naming each difference, accepted with --resume-ignore-config), and
// metrics.jsonl holding each epoch once after a resume. Small runs: 640 training images.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::slurp;
using Result = kiln::test::KilnResult;

const std::string kSample = std::string(KILN_SOURCE_DIR) + "/samples/fashion-mnist-mlp.toml";
const std::string kDamaged =
    "the checkpoint is damaged; use an earlier one (kiln train --resume <dir>, kiln eval --checkpoint <dir>)";

/// `kiln train` of the sample, small and quiet, with `extra` arguments.
Result train(const fs::path& run_dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train",           "--config", kSample, "--run-dir", run_dir.string(),
                                   "--set",           "data.train.limit=640", "--set", "data.eval.limit=200",
                                   "--set",           "log.progress=never"};
  args.insert(args.end(), extra.begin(), extra.end());
  return kiln::test::run_kiln(kiln::test::scratch_dir(), args);
}

/// How many metrics.jsonl records each (epoch, split) has.
std::map<std::pair<int, std::string>, int> records_per_epoch(const fs::path& file) {
  std::map<std::pair<int, std::string>, int> out;
  std::istringstream in(slurp(file));
  std::string line;
  while (std::getline(in, line)) {
    const auto v = kiln::test::json::parse(line);
    ++out[{static_cast<int>(v.at("epoch").number), v.at("split").string}];
  }
  return out;
}

BOOST_AUTO_TEST_SUITE(resume_trust)

BOOST_AUTO_TEST_CASE(auto_falls_back_past_a_damaged_newest_and_metrics_hold_each_epoch_once) {
  const fs::path dir = kiln::test::scratch_dir() / "run-fallback";
  const Result first = train(dir, {"--set", "run.epochs=3"});
  BOOST_REQUIRE_MESSAGE(first.status == 0, first.err);
  // As if the run died while (or after) writing its last checkpoint: epoch 3's metrics are in
  // the file, its checkpoint is damaged.
  const fs::path newest = dir / "checkpoints" / "epoch-0003";
  kiln::test::damage_safetensors(newest / "model.safetensors");

  const Result explicit_resume = train(dir, {"--set", "run.epochs=3", "--resume", newest.string()});
  BOOST_TEST(explicit_resume.status == 1);
  BOOST_TEST(explicit_resume.err.find("does not match its checksum") != std::string::npos, explicit_resume.err);
  BOOST_TEST(explicit_resume.err.find(kDamaged) != std::string::npos, explicit_resume.err);

  const Result resumed = train(dir, {"--set", "run.epochs=3", "--resume", "auto"});
  BOOST_REQUIRE_MESSAGE(resumed.status == 0, resumed.err);
  const std::string output = resumed.out + resumed.err + slurp(dir / "logs" / "rank0.log");
  BOOST_TEST(output.find("--resume auto: skipping damaged checkpoint " + newest.string()) != std::string::npos,
             output);
  BOOST_TEST(output.find("resumed from " + (dir / "checkpoints" / "epoch-0002").string()) != std::string::npos,
             output);

  const auto counts = records_per_epoch(dir / "metrics.jsonl");
  BOOST_TEST(counts.size() == 6u);  // epochs 1-3, train and test
  for (const auto& [key, n] : counts) BOOST_TEST(n == 1, "epoch " << key.first << " " << key.second << ": " << n);
}

BOOST_AUTO_TEST_CASE(another_runs_checkpoint_is_refused_naming_the_difference_unless_overridden) {
  const fs::path other = kiln::test::scratch_dir() / "run-other";
  const Result first = train(other, {"--set", "run.epochs=1", "--set", "model.hidden=[32]"});
  BOOST_REQUIRE_MESSAGE(first.status == 0, first.err);
  const fs::path ckpt = other / "checkpoints" / "epoch-0001";

  const fs::path dir = kiln::test::scratch_dir() / "run-mine";
  fs::create_directories(dir);  // --resume continues a run in an existing directory
  const Result refused = train(dir, {"--set", "run.epochs=2", "--set", "run.seed=7", "--resume", ckpt.string()});
  BOOST_TEST(refused.status == 1);
  BOOST_TEST(refused.err.find("the checkpoint is from a different run: checkpoint was written with model.hidden = "
                              "[32], this run has [128]; checkpoint was written with seed = 42, this run has 7; "
                              "resume with the config it was written with, or pass --resume-ignore-config if the "
                              "change is intended") != std::string::npos,
             refused.err);
  BOOST_TEST(!fs::exists(dir / "metrics.jsonl"));  // refused before anything was written

  // An intended change (here the seed) goes through with the override.
  const Result accepted = train(dir, {"--set", "run.epochs=2", "--set", "run.seed=7", "--set", "model.hidden=[32]",
                                      "--resume", ckpt.string(), "--resume-ignore-config"});
  BOOST_TEST(accepted.status == 0, accepted.err);
  BOOST_TEST(records_per_epoch(dir / "metrics.jsonl").size() == 2u);  // epoch 2, train and test
}

BOOST_AUTO_TEST_CASE(training_data_that_names_its_classes_otherwise_is_refused_unless_overridden) {
  // The sample names Fashion-MNIST's classes; its checkpoints keep them (class_names.hpp).
  const fs::path dir = kiln::test::scratch_dir() / "run-renamed";
  const Result first = train(dir, {"--set", "run.epochs=1"});
  BOOST_REQUIRE_MESSAGE(first.status == 0, first.err);
  const std::string shifted = R"(data.train.class_names=["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                 "Sandal", "Shirt", "Sneaker", "Ankle boot", "Bag"])";
  const Result refused = train(dir, {"--set", "run.epochs=2", "--set", shifted, "--resume", "auto"});
  BOOST_TEST(refused.status == 1);
  BOOST_TEST(refused.err.find("the training data's classes differ from the checkpoint's: class 8 is \"Bag\" in the "
                              "checkpoint but \"Ankle boot\" in [data.train]; resume with the data it was trained on, "
                              "or pass --resume-ignore-config if the change is intended") != std::string::npos,
             refused.err);
  BOOST_TEST(records_per_epoch(dir / "metrics.jsonl").size() == 2u);  // epoch 1 only: nothing written

  const Result accepted = train(dir, {"--set", "run.epochs=2", "--set", shifted, "--resume", "auto",
                                      "--resume-ignore-config"});
  BOOST_TEST(accepted.status == 0, accepted.err);
  BOOST_TEST(accepted.err.find("classes differ from the checkpoint's (class 8 is") != std::string::npos, accepted.err);

  // Resumed from data that names no classes, the run keeps the checkpoint's names (the swapped
  // ones epoch 2 was trained with) in its next checkpoint.
  const Result unnamed = train(dir, {"--set", "run.epochs=3", "--set", "data.train.class_names=[]", "--resume", "auto"});
  BOOST_TEST_REQUIRE(unnamed.status == 0, unnamed.err);
  const std::string header = slurp(dir / "checkpoints" / "epoch-0003" / "model.safetensors").substr(0, 4096);
  BOOST_TEST(header.find(R"(\"Sneaker\",\"Ankle boot\",\"Bag\"])") != std::string::npos, header);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
