// `kiln predict` on a folder of images without labels (imagenet layout = "files"), end to end
// through the real binary: each row names its image by its path under the root and carries no
// label columns; the summary has no accuracy; `kiln eval` and `kiln train` refuse the unlabeled
// source, naming the table, before anything is written. The model is an MLP on 3 x 8 x 8 inputs
// (it flattens the images), trained one epoch on synthetic data that names its four classes.
#define KILN_TEST_MODULE test_predict_images
#include "kiln_test_main.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "../integration/json_lite.hpp"
#include "../integration/kiln_process.hpp"
#include "fixtures.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::run_kiln;
using kiln::test::slurp;

const fs::path& scratch() { return kiln::test::scratch_dir(); }

/// The trained run (built once).
const fs::path& run_dir() {
  static const fs::path dir = [] {
    const fs::path config = scratch() / "mlp.toml", run = scratch() / "run";
    std::ofstream(config) << "[run]\nepochs = 1\n\n"
                             "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                             "[model]\ntype = \"mlp\"\nin_features = 192\nhidden = [16]\nnum_classes = 4\n\n"
                             "[data.train]\ntype = \"synthetic\"\nshape = [3, 8, 8]\nclasses = 4\ncount = 64\n"
                             "class_names = [\"cat\", \"dog\", \"fish, gold\", \"bird\"]\n\n"
                             "[loader]\nbatch = 16\nworkers = 1\n\n"
                             "[log]\nprogress = \"never\"\n";
    const auto r = run_kiln(scratch(), {"train", "--config", config.string(), "--run-dir", run.string()});
    BOOST_TEST_REQUIRE(r.status == 0, r.err);
    return run;
  }();
  return dir;
}

/// Three photos at two depths, and a file that is not an image.
const fs::path& images() {
  static const fs::path dir = [] {
    const fs::path d = scratch() / "photos";
    kiln_test::write_file(d / "garden" / "b, evening.jpg", kiln_test::solid_jpeg(40, 30, {200, 30, 40}));
    kiln_test::write_file(d / "garden" / "a.JPEG", kiln_test::gradient_jpeg(64, 48));
    kiln_test::write_file(d / "kitchen.png.jpg", kiln_test::gray_jpeg(20, 20, 100));
    kiln_test::write_file(d / "notes.txt", kiln_test::Bytes{'x'});
    return d;
  }();
  return dir;
}

/// --set arguments that make [data.eval] the unlabeled folder at 8 x 8.
std::vector<std::string> with_images(std::vector<std::string> args) {
  for (const std::string& s : {fmt::format("data.eval.type=\"imagenet\""), fmt::format("data.eval.root=\"{}\"", images().string()),
                               std::string("data.eval.layout=\"files\""), std::string("data.eval.size=8"),
                               std::string("data.eval.resize=8")}) {
    args.insert(args.end(), {"--set", s});
  }
  return args;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(predict_names_each_image_and_writes_no_labels) {
  const fs::path csv = scratch() / "photos.csv";
  const auto r = run_kiln(scratch(), with_images({"predict", "--run-dir", run_dir().string(), "--output", csv.string(),
                                                  "--top-k", "2"}));
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(r.out == fmt::format("predict  3 samples (unlabeled)  -> {}\n", csv.string()));
  const auto rows = lines_of(slurp(csv));
  BOOST_TEST_REQUIRE(rows.size() == 4u);
  BOOST_TEST(rows[0] == "index,id,top1,top1_name,prob1,top2,top2_name,prob2");
  // Sorted by the path under the root; a path with a comma is quoted (RFC 4180).
  BOOST_TEST(rows[1].rfind("0,garden/a.JPEG,", 0) == 0u, rows[1]);
  BOOST_TEST(rows[2].rfind("1,\"garden/b, evening.jpg\",", 0) == 0u, rows[2]);
  BOOST_TEST(rows[3].rfind("2,kitchen.png.jpg,", 0) == 0u, rows[3]);

  const fs::path jsonl = scratch() / "photos.jsonl";
  const auto j = run_kiln(scratch(), with_images({"predict", "--run-dir", run_dir().string(), "--output", jsonl.string()}));
  BOOST_TEST_REQUIRE(j.status == 0, j.err);
  const auto objects = lines_of(slurp(jsonl));
  BOOST_TEST_REQUIRE(objects.size() == 3u);
  const auto first = kiln::test::json::parse(objects[1]);
  BOOST_TEST(first.at("id").string == "garden/b, evening.jpg");
  BOOST_TEST(first.find("label") == nullptr);
  BOOST_TEST(first.find("label_name") == nullptr);
  BOOST_TEST(first.at("top").items.size() == 4u);  // default top-k 5, capped at the 4 classes
  BOOST_TEST(first.at("names").items.size() == 4u);
}

BOOST_AUTO_TEST_CASE(eval_and_train_refuse_unlabeled_images_naming_the_table) {
  const auto ev = run_kiln(scratch(), with_images({"eval", "--run-dir", run_dir().string()}));
  const std::string e = kiln::test::one_line_error(ev);
  BOOST_TEST(e.find("[data.eval] (imagenet: ImageNet images (eval transform, 8x8 f32): 3 images, unlabeled, under ") == 0u,
             e);
  BOOST_TEST(e.find("has no labels, and kiln eval scores predictions against labels; kiln predict writes a model's "
                    "predictions for unlabeled samples") != std::string::npos,
             e);

  const fs::path run = scratch() / "train-on-photos";
  const auto tr = run_kiln(scratch(), with_images({"train", "--config", (run_dir() / "config.toml").string(), "--run-dir",
                                                   run.string()}));
  const std::string t = kiln::test::one_line_error(tr);
  BOOST_TEST(t.find("[data.eval] (imagenet: ") == 0u, t);
  BOOST_TEST(t.find("has no labels, and kiln train scores predictions against labels") != std::string::npos, t);
  BOOST_TEST(!fs::exists(run));
}
