// `kiln summary` through the real binary: the mlp (8 -> 16 -> 3) of a synthetic config, every
// parameter with its shape and size, what trains and with what weight decay (biases none, frozen
// ones none), the --depth sums and the --json document, what [model] init gives each tensor;
// ResNet-50's counts against torchvision's published ones; mistakes are one-line errors or usage
// errors.
#define KILN_TEST_MODULE test_summary
#include "kiln_test_main.hpp"

#include <fstream>
#include <string>
#include <vector>

#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::KilnResult;
using kiln::test::json::Value;

KilnResult run(const std::vector<std::string>& args) { return kiln::test::run_kiln(kiln::test::scratch_dir(), args); }

/// The mlp 8 -> 16 -> 3 on synthetic data, AdamW with weight decay 0.05.
fs::path mlp_config() {
  const fs::path config = kiln::test::scratch_dir() / "mlp.toml";
  std::ofstream(config) << "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                           "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [16]\nnum_classes = 3\n\n"
                           "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 64\n\n"
                           "[optimizer]\ntype = \"adamw\"\nweight_decay = 0.05\n";
  return config;
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_parameter_with_its_shape_size_and_decay) {
  const KilnResult r = run({"summary", "--config", mlp_config().string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.out.find("): input f32 (8), 3 classes\n") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("optimizer  adamw, weight_decay 0.05 ") != std::string::npos, r.out);
  BOOST_TEST(has_line(r.out, "name             shape    values  trains  weight decay"), r.out);
  BOOST_TEST(has_line(r.out, "layers.0.weight  (16, 8)     128  yes     0.05"), r.out);
  BOOST_TEST(has_line(r.out, "layers.0.bias    (16)         16  yes     0"), r.out);  // biases take none
  BOOST_TEST(has_line(r.out, "head.weight      (3, 16)      48  yes     0.05"), r.out);
  BOOST_TEST(has_line(r.out, "head.bias        (3)           3  yes     0"), r.out);
  BOOST_TEST(has_line(r.out, "parameters 4 tensors, 195 values (0.00 MiB as f32): 195 trainable, 0 frozen"), r.out);
}

BOOST_AUTO_TEST_CASE(freeze_patterns_show_what_trains_and_depth_adds_up) {
  const KilnResult r = run({"summary", "--config", mlp_config().string(), "--set", "model.freeze=[\"layers.*\"]",
                            "--depth", "1"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.out.find("\nfreeze: 2 of 4 tensors (144 of 195 values) by model.freeze") != std::string::npos, r.out);
  BOOST_TEST(has_line(r.out, "name    tensors  values  trainable"), r.out);
  BOOST_TEST(has_line(r.out, "layers        2     144          0"), r.out);
  BOOST_TEST(has_line(r.out, "head          2      51         51"), r.out);
  BOOST_TEST(has_line(r.out, "parameters 4 tensors, 195 values (0.00 MiB as f32): 51 trainable, 144 frozen"), r.out);
  // Per tensor: frozen ones take no decay.
  const KilnResult full = run({"summary", "--config", mlp_config().string(), "--set", "model.freeze=[\"layers.*\"]"});
  BOOST_TEST_REQUIRE(full.status == 0, full.err);
  BOOST_TEST(has_line(full.out, "layers.0.weight  (16, 8)     128  frozen  -"), full.out);
}

BOOST_AUTO_TEST_CASE(json_lists_every_tensor) {
  const KilnResult r = run({"summary", "--config", mlp_config().string(), "--json"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value v = kiln::test::json::parse(r.out);
  BOOST_TEST(v.at("model").string.starts_with("mlp "));
  BOOST_TEST(v.at("classes").number == 3);
  BOOST_TEST(v.at("input").at("shape").items.size() == 1u);
  BOOST_TEST(v.at("optimizer").string == "adamw");
  const auto& params = v.at("parameters").items;
  BOOST_TEST_REQUIRE(params.size() == 4u);
  BOOST_TEST(params[0].at("name").string == "layers.0.weight");
  BOOST_TEST(params[0].at("values").number == 128);
  BOOST_TEST(params[0].at("weight_decay").number == 0.05);
  BOOST_TEST(params[1].at("weight_decay").number == 0);
  BOOST_TEST(params[3].at("shape").items[0].number == 3);
  BOOST_TEST(v.at("buffers").items.empty());
}

// With [model] init the file is loaded as a run's start loads it: each tensor says what it got,
// and a file that does not fit fails with the run's message. The file: the checkpoint of a
// one-epoch run of the same mlp.
BOOST_AUTO_TEST_CASE(init_says_what_each_tensor_gets_from_the_file) {
  const fs::path run_dir = kiln::test::scratch_dir() / "init-source";
  const KilnResult trained =
      run({"train", "--config", mlp_config().string(), "--run-dir", run_dir.string(), "--set", "run.epochs=1"});
  BOOST_TEST_REQUIRE(trained.status == 0, trained.err);
  const std::string file = (run_dir / "checkpoints/epoch-0001/model.safetensors").string();
  const KilnResult r = run({"summary", "--config", mlp_config().string(), "--set", "model.init=\"" + file + "\"",
                            "--set", "model.init_exclude=[\"head.*\"]"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(has_line(r.out, "init       " + file + ": 2 tensors loaded, 2 kept fresh by init_exclude, 0 missing from "
                                                      "the file"),
             r.out);
  BOOST_TEST(has_line(r.out, "layers.0.weight  (16, 8)     128  yes     0.05          loaded"), r.out);
  BOOST_TEST(has_line(r.out, "head.bias        (3)           3  yes     0             init_exclude"), r.out);
  const Value v = kiln::test::json::parse(
      run({"summary", "--config", mlp_config().string(), "--set", "model.init=\"" + file + "\"", "--json"}).out);
  BOOST_TEST(v.at("parameters").items.at(0).at("init").string == "loaded");
  const std::string line = kiln::test::one_line_error(run({"summary", "--config", mlp_config().string(), "--set",
                                                            "model.init=\"" + file + "\"", "--set", "model.hidden=[4]"}));
  BOOST_TEST(line.find("does not fit the model: 'layers.0.weight' is (16, 8) in the file but (4, 8) in the model") !=
                 std::string::npos,
             line);
}

BOOST_AUTO_TEST_CASE(resnet50_has_torchvisions_counts) {
  // torchvision's resnet50: 25,557,032 parameters in 161 tensors; its fc 2048 x 1000 + 1000.
  const fs::path sample = fs::path(KILN_SOURCE_DIR) / "samples/resnet50-synthetic.toml";
  const KilnResult r = run({"summary", "--config", sample.string(), "--depth", "1"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(has_line(r.out, "fc            2   2,049,000   2,049,000"), r.out);
  BOOST_TEST(r.out.find("parameters 161 tensors, 25,557,032 values (97.49 MiB as f32): 25,557,032 trainable") !=
                 std::string::npos,
             r.out);
  // 53 batch norms, each with a running mean and variance.
  BOOST_TEST(r.out.find("buffers    106 tensors, 53,120 values") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(mistakes_are_one_line_errors) {
  const std::string line = kiln::test::one_line_error(
      run({"summary", "--config", mlp_config().string(), "--set", "model.freeze=[\"layer9.*\"]"}));
  BOOST_TEST(line.find("'layer9.*' matches no parameter of the model; its parameters are layers.0.weight") !=
                 std::string::npos,
             line);
  const std::string typo = kiln::test::one_line_error(run({"summary", "--config", mlp_config().string(), "--set",
                                                            "model.hiden=[4]"}));
  BOOST_TEST(typo.find("unknown key 'hiden' in [model] (did you mean 'hidden'?)") != std::string::npos, typo);
  BOOST_TEST(run({"summary", "--config", mlp_config().string(), "--json", "--depth", "1"}).status == 2);
  BOOST_TEST(run({"summary", "--config", mlp_config().string(), "--depth", "0"}).status == 2);
  BOOST_TEST(run({"summary"}).status == 2);
}
