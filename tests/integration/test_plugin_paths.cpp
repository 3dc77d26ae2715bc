// Part of test_train_errors: path parameters (KILN_PARAM_PATH). A relative value in a config
// file is read from the file's folder, whatever the working directory; a --set value from the
// working directory; the run directory's config.toml records the absolute path.
//
// Needs the Debian Fashion-MNIST files in /usr/share/datasets/fashion-mnist (as test_train_e2e).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::run_kiln;
using kiln::test::scratch_dir;

const fs::path kData = "/usr/share/datasets/fashion-mnist";

/// `dir` holding links to the Fashion-MNIST training files, as a user's own data folder.
void make_data_folder(const fs::path& dir) {
  fs::create_directories(dir);
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    fs::create_symlink(kData / f, dir / f);
  }
}

/// <dir>/run.toml: a short mlp run reading [data.train] path = `path` (as written).
fs::path config_in(const fs::path& dir, const std::string& path) {
  fs::create_directories(dir);
  const fs::path file = dir / "run.toml";
  std::ofstream(file) << "[run]\nepochs = 1\n\n"
                         "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                         "[model]\ntype = \"mlp\"\nhidden = [8]\n\n"
                         "[data.train]\ntype = \"mnist\"\npath = \""
                      << path
                      << "\"\nlimit = 256\n\n"
                         "[loader]\nbatch = 64\nworkers = 1\n\n"
                         "[log]\nprogress = \"never\"\n";
  return file;
}

BOOST_AUTO_TEST_CASE(relative_path_in_a_config_file_is_read_from_its_folder) {
  const fs::path project = scratch_dir() / "project";
  make_data_folder(project / "data");
  const fs::path config = config_in(project, "data");
  const fs::path elsewhere = scratch_dir() / "elsewhere";  // no data/ here
  fs::create_directories(elsewhere);
  const fs::path run_dir = scratch_dir() / "run-relative";

  const auto r = run_kiln(elsewhere, {"train", "--config", config.string(), "--run-dir", run_dir.string()});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const std::string resolved = kiln::test::slurp(run_dir / "config.toml");
  BOOST_TEST(resolved.find("path = '" + (project / "data").string() + "'") != std::string::npos, resolved);
  // The resolved config names the data absolutely, so it reruns from any directory.
  const auto again = run_kiln(elsewhere, {"train", "--config", (run_dir / "config.toml").string(), "--run-dir",
                                          (scratch_dir() / "run-relative-again").string()});
  BOOST_TEST(again.status == 0, again.err);
}

BOOST_AUTO_TEST_CASE(relative_path_from_the_command_line_is_read_from_the_working_directory) {
  const fs::path shell = scratch_dir() / "shell";
  make_data_folder(shell / "mine");
  const fs::path config = config_in(scratch_dir() / "configs", "/nonexistent");
  const fs::path run_dir = scratch_dir() / "run-set";

  const auto r = run_kiln(shell, {"train", "--config", config.string(), "--run-dir", run_dir.string(), "--set",
                                  "data.train.path=mine"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const std::string resolved = kiln::test::slurp(run_dir / "config.toml");
  BOOST_TEST(resolved.find("path = '" + (shell / "mine").string() + "'") != std::string::npos, resolved);
}

BOOST_AUTO_TEST_CASE(plugins_show_names_the_path_type) {
  const auto r = run_kiln(scratch_dir(), {"plugins", "show", "mnist"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  bool found = false;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  path ", 0) == 0) {
      found = true;
      BOOST_TEST(line.find(" path, default \"/usr/share/datasets/fashion-mnist\"") != std::string::npos, line);
    }
  }
  BOOST_TEST(found, "no 'path' parameter line in:\n" << r.out);
}

BOOST_AUTO_TEST_CASE(plugins_show_json_from_the_binary_parses) {
  const auto r = run_kiln(scratch_dir(), {"plugins", "show", "mnist", "--json"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const kiln::test::json::Value doc = kiln::test::json::parse(r.out);
  BOOST_REQUIRE(doc.at("plugins").items.size() == 1u);
  const auto& p = doc.at("plugins").items[0];
  BOOST_TEST(p.at("name").string == "mnist");
  BOOST_TEST(p.at("kind").string == "data");
  BOOST_TEST(!p.at("contract").string.empty());
  bool found = false;
  for (const auto& param : p.at("params").items) {
    if (param.at("name").string != "path") continue;
    found = true;
    BOOST_TEST(param.at("type").string == "path");
    BOOST_TEST(param.at("default").string == "\"/usr/share/datasets/fashion-mnist\"");
  }
  BOOST_TEST(found, "no 'path' parameter in:\n" << r.out);
}

}  // namespace
