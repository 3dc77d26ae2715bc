// `kiln train` launch paths through the real binary: --nproc usage errors, --nproc 1 end to end
// (supervisor, rendezvous store, shared run directory, --dump-params), a rank failing under
// --nproc (before the run directory exists, and, with four gloo ranks, after), and the [dist]
// checks a rank of a larger world makes before it writes anything. Every run is under a hard
// wall clock.
#define KILN_TEST_MODULE test_launch_cli
#include "kiln_test_main.hpp"

#include <fmt/format.h>

#include "kiln/io/safetensors.hpp"
#include "process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::Process;
using kiln::test::slurp;

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/bin/kiln";
const std::string kSample = std::string(KILN_SOURCE_DIR) + "/samples/fashion-mnist-mlp.toml";
constexpr std::chrono::seconds kWallClock{120};

const fs::path& scratch() {
  static const struct Scratch {
    fs::path path = kiln::test::scratch_dir("launch-cli");
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } s;
  return s.path;
}

struct Result {
  std::optional<int> status;
  std::string out, err;
};

/// kiln train with the sample config, a small training split and `args`; TMPDIR is a private
/// directory so the test can see what the supervisor leaves there.
Result train(const std::vector<std::string>& args, std::map<std::string, std::optional<std::string>> env = {}) {
  static int n = 0;
  const fs::path out = scratch() / fmt::format("out{}", n), err = scratch() / fmt::format("err{}", n++);
  std::vector<std::string> argv = {kKiln,   "train", "--config", kSample, "--set", "data.train.limit=1280", "--set",
                                   "run.epochs=1", "--set", "log.progress=never"};
  argv.insert(argv.end(), args.begin(), args.end());
  env.emplace("KILN_PLUGIN_PATH", std::nullopt);
  env.emplace("KILN_RENDEZVOUS", std::nullopt);
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                        "SLURM_PROCID"}) {
    env.emplace(v, std::nullopt);
  }
  fs::create_directories(scratch() / "tmp");
  env.emplace("TMPDIR", (scratch() / "tmp").string());
  Process p(argv, env, scratch(), out, err);
  Result r;
  r.status = p.wait_for(kWallClock);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// The one "kiln: error: " line of a failed run (without the prefix).
std::string error_line(const Result& r, int status = 1) {
  BOOST_TEST_REQUIRE(r.status.has_value(), "kiln hung");
  BOOST_TEST(*r.status == status, "status " << *r.status << ", stderr: " << r.err);
  const auto at = r.err.rfind("kiln: ");
  BOOST_TEST_REQUIRE(at != std::string::npos, r.err);
  std::string line = r.err.substr(at);
  BOOST_TEST((line.find('\n') == line.size() - 1), "not one line: " << line);
  line.pop_back();
  return line;
}

bool tmp_is_empty() { return fs::is_empty(scratch() / "tmp"); }

}  // namespace

BOOST_AUTO_TEST_CASE(nproc_must_be_positive) {
  const Result r = train({"--nproc", "0"});
  BOOST_TEST(error_line(r) == "kiln: error: --nproc 0 must be at least 1");
}

BOOST_AUTO_TEST_CASE(nproc_excludes_explicit_ranks) {
  const Result r = train({"--nproc", "2", "--rank", "0", "--world-size", "2"});
  BOOST_TEST(error_line(r, 2) ==
             "kiln: --nproc starts its own ranks; it cannot be combined with --rank/--world-size (see kiln --help)");
}

BOOST_AUTO_TEST_CASE(nproc_one_end_to_end) {
  const fs::path dir = scratch() / "run-nproc1";
  const fs::path dump = scratch() / "params-nproc1.bin";
  const Result r = train({"--nproc=1", "--run-dir", dir.string(), "--dump-params", dump.string()});
  BOOST_TEST_REQUIRE(r.status.value_or(-1) == 0, "stderr: " << r.err);
  for (const char* f : {"config.toml", "metrics.jsonl", "logs/rank0.log"}) BOOST_TEST(fs::exists(dir / f), f);
  const std::string log = slurp(dir / "logs/rank0.log");
  BOOST_TEST(log.find("| world 1 | rank 0 -> ") != std::string::npos);
  BOOST_TEST(log.find("ranks from kiln --nproc (RANK, WORLD_SIZE)") != std::string::npos, log);
  BOOST_TEST(log.find("dist      rendezvous file:" + (scratch() / "tmp").string() + "/kiln-rendezvous-") !=
                 std::string::npos,
             log);
  BOOST_TEST(log.find("(from environment variable KILN_RENDEZVOUS); timeout 300 s per collective") != std::string::npos);
  // The MLP 784 -> 128 -> 10: 784*128 + 128 + 128*10 + 10 parameters, 4 bytes each.
  BOOST_TEST(fs::file_size(dump) == 4u * (784u * 128u + 128u + 128u * 10u + 10u));
  BOOST_TEST(tmp_is_empty(), "the rendezvous directory was left behind");
}

BOOST_AUTO_TEST_CASE(dump_params_matches_between_runs) {
  // Same seed, one rank, with and without the supervisor: bit-identical parameters.
  const fs::path a = scratch() / "params-a.bin", b = scratch() / "params-b.bin";
  BOOST_TEST_REQUIRE(train({"--run-dir", (scratch() / "run-a").string(), "--dump-params", a.string()}).status.value_or(-1) == 0);
  BOOST_TEST_REQUIRE(
      train({"--nproc", "1", "--run-dir", (scratch() / "run-b").string(), "--dump-params", b.string()}).status.value_or(-1) == 0);
  BOOST_TEST(slurp(a) == slurp(b));
}

BOOST_AUTO_TEST_CASE(failing_rank_under_nproc) {
  // The local communicator refuses a world of 2, so both ranks exit 1; whichever is reaped
  // first is named, and nothing is left in TMPDIR, nor a run directory (the start failed).
  const fs::path dir = scratch() / "run-local2";
  const Result r = train({"--nproc", "2", "--run-dir", dir.string()});
  const std::string line = error_line(r);
  BOOST_TEST(line.rfind("kiln: error: rank ", 0) == 0u, line);
  BOOST_TEST(line.find(" exited with status 1; ") != std::string::npos, line);
  BOOST_TEST(r.err.find("comm.type = \"local\" runs one rank") != std::string::npos, r.err);
  BOOST_TEST(tmp_is_empty());
  BOOST_TEST(!fs::exists(dir), "the failed start left " << dir);
}

BOOST_AUTO_TEST_CASE(start_failing_after_the_run_directory_exists_under_nproc_leaves_none) {
  // A [model] init that does not fit is found after rank 0 created the run directory; every
  // rank fails. When another rank exits first, the supervisor sends rank 0 SIGTERM while it is
  // removing what the start wrote: rank 0 holds the signal back until the rollback is done
  // (kiln/io/stop_signal_deferral.hpp). Before that, one manual run in five with the full
  // dataset left the directory; the race is rarer with this small split, so the deferral itself
  // is tested deterministically in test_train (stop_signal_deferral), and this checks the whole.
  const fs::path init = scratch() / "tiny.safetensors";
  const float one = 1.0f;
  kiln::io::write_safetensors(init, {{"layers.0.weight", kiln::DType::f32, kiln::Shape{1, 1}, &one}}, {});
  for (int attempt = 0; attempt < 3; ++attempt) {
    const fs::path dir = scratch() / fmt::format("run-init-refused-{}", attempt);
    const Result r = train({"--nproc", "4", "--set", "comm.type=\"gloo\"", "--set",
                            "model.init=\"" + init.string() + "\"", "--run-dir", dir.string()});
    BOOST_TEST(error_line(r).find(" exited with status 1; ") != std::string::npos, error_line(r));
    BOOST_TEST(r.err.find("does not fit the model: 'layers.0.weight'") != std::string::npos, r.err);
    BOOST_TEST(tmp_is_empty());
    BOOST_TEST(!fs::exists(dir), "attempt " << attempt << ": the failed start left " << dir);
  }
}

BOOST_AUTO_TEST_CASE(larger_world_needs_rendezvous) {
  const fs::path dir = scratch() / "run-no-rendezvous";
  const Result r = train({"--rank", "1", "--world-size", "2", "--run-dir", dir.string()});
  BOOST_TEST(error_line(r) ==
             "kiln: error: rank 1 of 2 (ranks from command line) has no rendezvous store to meet the other ranks "
             "through: set dist.rendezvous = \"tcp://<rank 0's host>:<port>\" or \"file:<dir>\" with a directory every "
             "rank can see (or export KILN_RENDEZVOUS=...), or start the ranks with `kiln train --nproc N`");
  BOOST_TEST(!fs::exists(dir), "a run directory was created before the config was known to be valid");
}

BOOST_AUTO_TEST_CASE(larger_world_needs_named_run_dir) {
  const Result r = train({"--rank", "0", "--world-size", "2"}, {{"KILN_RENDEZVOUS", "file:" + (scratch() / "rdzv").string()}});
  BOOST_TEST(error_line(r) ==
             "kiln: error: with 2 ranks every rank writes into one run directory, so it must be named: pass --run-dir "
             "DIR (on a path every rank sees) or set run.run_dir (`kiln train --nproc N` does this for you)");
  BOOST_TEST(!fs::exists(scratch() / "runs"));
}

BOOST_AUTO_TEST_CASE(timeout_must_be_positive) {
  const Result r = train({"--set", "dist.timeout_s=0", "--run-dir", (scratch() / "run-timeout").string()});
  BOOST_TEST(error_line(r) ==
             "kiln: error: --set dist.timeout_s: [dist] timeout_s = 0 is out of range: it must be in (0, 604800]");
  BOOST_TEST(!fs::exists(scratch() / "run-timeout"));
}

BOOST_AUTO_TEST_CASE(dist_keys_are_checked) {
  const Result r = train({"--set", "dist.timeout=5"});
  BOOST_TEST(error_line(r).find("unknown key 'timeout' in [dist]") != std::string::npos);
}
