// RunDirRollback: a failed start removes what it created in the run directory, never what was
// there before; a committed start keeps everything.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "../support/temp_dir.hpp"
#include "kiln/io/run_dir_rollback.hpp"

namespace fs = std::filesystem;
using kiln::test::TempDir;

namespace {

void touch(const fs::path& file, const std::string& text = "x") {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_dir_rollback)

BOOST_AUTO_TEST_CASE(new_directory_and_missing_parents_are_removed) {
  const TempDir tmp("rollback");
  const fs::path dir = tmp.path / "runs" / "20260101-000000";
  {
    kiln::io::RunDirRollback rollback(dir);
    touch(dir / "logs" / "rank0.log");
    touch(dir / "config.toml");
  }
  BOOST_TEST(!fs::exists(tmp.path / "runs"));
  BOOST_TEST(fs::exists(tmp.path));
}

BOOST_AUTO_TEST_CASE(existing_directory_keeps_its_entries_and_loses_the_new_ones) {
  const TempDir tmp("rollback");
  const fs::path dir = tmp.path / "run";
  touch(dir / "config.toml", "old");
  touch(dir / "checkpoints" / "epoch-1" / "model.safetensors", "weights");
  touch(dir / "logs" / "rank0.log", "old log\n");
  {
    kiln::io::RunDirRollback rollback(dir);
    touch(dir / "config.resume-1.toml");
    touch(dir / "checkpoints" / "epoch-2" / "model.safetensors");
    std::ofstream(dir / "logs" / "rank0.log", std::ios::app) << "new line\n";
  }
  BOOST_TEST(!fs::exists(dir / "config.resume-1.toml"));
  BOOST_TEST(!fs::exists(dir / "checkpoints" / "epoch-2"));
  BOOST_TEST(fs::exists(dir / "checkpoints" / "epoch-1" / "model.safetensors"));
  std::ifstream config(dir / "config.toml");
  std::string text;
  config >> text;
  BOOST_TEST(text == "old");
  BOOST_TEST(fs::exists(dir / "logs" / "rank0.log"), "an existing file is kept, even if appended to");
}

BOOST_AUTO_TEST_CASE(committed_start_keeps_everything) {
  const TempDir tmp("rollback");
  const fs::path dir = tmp.path / "run";
  {
    kiln::io::RunDirRollback rollback(dir);
    touch(dir / "config.toml");
    rollback.commit();
  }
  BOOST_TEST(fs::exists(dir / "config.toml"));
}

BOOST_AUTO_TEST_SUITE_END()
