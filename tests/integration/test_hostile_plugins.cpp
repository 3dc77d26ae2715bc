// Part of test_train_errors: hostile plugin libraries and oversized requests through the real
// binary. A library whose initialisation calls _exit(0) must never make `kiln train` exit 0
// without training: a run that names its plugins never opens it, and a run that needs it (or
// `kiln plugins list`) has it refused after a probe load in a child process. An allocation the
// machine cannot hold ends with "needs X bytes, Y available" naming who asked.
//
// Needs the Debian Fashion-MNIST files in /usr/share/datasets/fashion-mnist (as test_train_e2e).
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::fixture_dir;
using kiln::test::one_line_error;
using kiln::test::run_kiln;
using kiln::test::scratch_dir;

const std::string kSample = std::string(KILN_SOURCE_DIR) + "/samples/fashion-mnist-mlp.toml";

/// A plugin directory holding the _exit(0) and SIGSEGV fixtures and a file that is no library.
fs::path planted_dir() {
  const fs::path dir = scratch_dir() / "planted";
  if (!fs::exists(dir)) {
    fs::create_directories(dir);
    fs::copy_file(fixture_dir("exits") / "libkiln-fixture-exits.so", dir / "libkiln-evil.so");
    fs::copy_file(fixture_dir("crashes") / "libkiln-fixture-crashes.so", dir / "libkiln-crash.so");
    std::ofstream(dir / "libkiln-garbage.so") << "not a library";
  }
  return dir;
}

std::vector<std::string> short_run(const std::string& name) {
  return {"train", "--config", kSample, "--set", "run.epochs=1", "--set", "data.train.limit=512", "--set",
          "data.eval.limit=256", "--set", "log.progress=never", "--run-dir", (scratch_dir() / name).string()};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

BOOST_AUTO_TEST_CASE(planted_libraries_do_not_touch_a_run_that_names_its_plugins) {
  const auto r = run_kiln(scratch_dir(), with(short_run("planted-ok"), {"--plugin-path", planted_dir().string()}));
  BOOST_TEST(r.status == 0, r.err);
  BOOST_TEST(fs::exists(scratch_dir() / "planted-ok" / "metrics.jsonl"));
}

BOOST_AUTO_TEST_CASE(a_library_that_exits_while_loading_fails_the_run_that_needs_it) {
  const auto r = run_kiln(scratch_dir(), with(short_run("planted-needed"), {"--plugin-path", planted_dir().string(),
                                                                           "--set", "precision.type=\"evil\""}));
  const std::string line = one_line_error(r);
  BOOST_TEST(line.find("no precision plugin named 'evil'") != std::string::npos, line);
  BOOST_TEST(line.find((planted_dir() / "libkiln-evil.so").string() +
                       " ended the loading process with exit status 0 while loading") != std::string::npos,
             line);
  BOOST_TEST(line.find((planted_dir() / "libkiln-crash.so").string() +
                       " killed the loading process with signal 11 (SIGSEGV)") != std::string::npos,
             line);
  BOOST_TEST(!fs::exists(scratch_dir() / "planted-needed"));
}

BOOST_AUTO_TEST_CASE(plugins_list_survives_planted_libraries) {
  const auto r = run_kiln(scratch_dir(), {"plugins", "list", "--plugin-path", planted_dir().string()});
  BOOST_TEST(r.status == 0, r.err);
  const std::string all = r.out + r.err;
  BOOST_TEST(all.find("ended the loading process with exit status 0") != std::string::npos, all);
  BOOST_TEST(all.find("mlp") != std::string::npos, all);  // the real plugins are still listed
}

BOOST_AUTO_TEST_CASE(oversized_batch_names_the_bytes_it_needs) {
  // Refused when the trainer builds its loader (after the banner), before any allocation: the
  // error names who asked (the data loader's batch buffer, sized by loader.batch), the
  // allocation site and both byte counts.
  const auto r = run_kiln(scratch_dir(), with(short_run("huge-batch"), {"--set", "loader.batch=2000000000", "--set",
                                                                       "loader.last_batch=\"partial\""}));
  BOOST_TEST(r.status == 1, r.err);
  const auto at = r.err.rfind("kiln: error: ");
  BOOST_TEST_REQUIRE(at != std::string::npos, r.err);
  const std::string line = r.err.substr(at);
  BOOST_TEST(line.find("data loader, batch buffer f32(2000000000, 784) (sized by loader.batch): cpu backend, allocate: "
                       "a f32 tensor of shape (2000000000, 784) needs 6272000000000 bytes, ") != std::string::npos,
             line);
  BOOST_TEST(line.find(" available (") != std::string::npos, line);
  BOOST_TEST(!fs::exists(scratch_dir() / "huge-batch"));
}
