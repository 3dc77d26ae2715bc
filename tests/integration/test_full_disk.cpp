// Part of test_train_errors: a checkpoint that cannot be written whole (a file-size limit here,
// `ulimit -f`, which fails writes with EFBIG as a full disk fails them with ENOSPC) ends the run
// with one line naming the file, the reason and how far the write got. The partial checkpoint is
// removed (its space given back), and what was written before it (metrics.jsonl) stays whole.
//
// Needs the Debian Fashion-MNIST files in /usr/share/datasets/fashion-mnist (as test_train_e2e).
#include <boost/test/unit_test.hpp>

#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::one_line_error;
using kiln::test::run_kiln;
using kiln::test::scratch_dir;

const std::string kSample = std::string(KILN_SOURCE_DIR) + "/samples/fashion-mnist-mlp.toml";

BOOST_AUTO_TEST_CASE(a_checkpoint_past_a_file_size_limit_is_an_error_and_leaves_no_partial) {
  const fs::path run_dir = scratch_dir() / "run-file-size-limit";
  // The sample's mlp (101,770 parameters): model.safetensors ~400 KB fits under the limit of
  // 1200 blocks of 512 bytes (600 KiB; dash counts ulimit -f in 512-byte blocks, bash in KiB,
  // either way below the ~800 KB trainer.safetensors with Adam's two moments).
  const auto r = run_kiln(scratch_dir(),
                          {"train", "--config", kSample, "--set", "run.epochs=1", "--set", "data.train.limit=512",
                           "--set", "data.eval.limit=256", "--set", "log.progress=never", "--set", "log.level=warn",
                           "--run-dir", run_dir.string()},
                          "ulimit -f 1200");
  const std::string temp = (run_dir / "checkpoints" / ".partial-epoch-0001" / "trainer.safetensors.tmp").string();
  const std::string message = one_line_error(r);
  BOOST_TEST(message.rfind("cannot write " + temp + " (", 0) == 0u, message);
  BOOST_TEST(message.find(" bytes written): File too large") != std::string::npos, message);
  BOOST_TEST(!fs::exists(run_dir / "checkpoints" / ".partial-epoch-0001"));
  BOOST_TEST(!fs::exists(run_dir / "checkpoints" / "epoch-0001"));
  BOOST_TEST(kiln::test::slurp(run_dir / "metrics.jsonl").find("\"split\": \"test\"") != std::string::npos);
}

}  // namespace
