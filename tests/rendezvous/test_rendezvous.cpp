// Ranks in separate processes meeting through the TCP store, without a shared directory:
//   - three `kiln bench-comm --comm gloo` ranks started torchrun-style (RANK, WORLD_SIZE,
//     TORCHELASTIC_RUN_ID, MASTER_ADDR=127.0.0.2, MASTER_PORT) complete an all-reduce;
//   - two `kiln train` ranks under torchrun's agent-store convention: something already listens
//     on MASTER_PORT (as torchrun's agent does), so Kiln serves on MASTER_PORT + 1, and the
//     banner says "ranks from torchrun" and where the store is;
//   - rank 1 alone: it gives up after dist.timeout_s naming the endpoint and "connection refused";
//     rank 0 alone: it gives up naming the missing rank 1;
//   - rank 0 killed while rank 1 waits for rank 2: rank 1 fails at once ("lost its connection");
//   - under mpirun (when present; as root with --allow-run-as-root): two bench-comm ranks, then
//     two `kiln train` ranks, meet through the `mpi` rendezvous with no address given at all.
// Every process runs under a hard wall clock (tests/launch/process.hpp).
#define KILN_TEST_MODULE test_rendezvous
#include "kiln_test_main.hpp"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "../launch/process.hpp"
#include "kiln/dist/tcp_store_server.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::Process;
using kiln::test::slurp;
using Env = std::map<std::string, std::optional<std::string>>;
using std::chrono::seconds;

const std::string kKiln = std::string(KILN_BINARY_DIR) + "/bin/kiln";
const std::string kSample = std::string(KILN_SOURCE_DIR) + "/samples/fashion-mnist-mlp.toml";
constexpr seconds kWallClock{240};

const fs::path& scratch() {
  static const struct Scratch {
    fs::path path = kiln::test::scratch_dir("rendezvous");
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } s;
  return s.path;
}

/// No launcher variables and no configured rendezvous: what a rank sees comes from the test.
Env clean_env() {
  Env env{{"KILN_PLUGIN_PATH", std::nullopt}, {"KILN_RENDEZVOUS", std::nullopt}, {"OMP_NUM_THREADS", "1"}};
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "KILN_LAUNCHER", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"}) {
    env.emplace(v, std::nullopt);
  }
  return env;
}

/// The first of `count` consecutive ports that were free a moment ago, picked at random below the
/// kernel's ephemeral range (32768-60999 by default). Not the kernel's own choice of a free port:
/// that is an ephemeral port, and in a parallel ctest run the other suites' outgoing connections
/// take ephemeral ports all the time, so one of them could take this test's port (or, for the
/// agent-store case, MASTER_PORT + 1) before the rank that serves it binds it.
int free_ports(int count = 1) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 32000);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int first = pick(rng);
    try {
      std::vector<std::unique_ptr<kiln::dist::TcpStoreServer>> probes;
      for (int i = 0; i < count; ++i) probes.push_back(std::make_unique<kiln::dist::TcpStoreServer>(first + i));
      return first;
    } catch (const std::exception&) {
      // in use: try another
    }
  }
  BOOST_FAIL("no " << count << " consecutive free ports between 20000 and 32000 in 200 tries");
  return 0;
}

Env torchrun_env(int rank, int world, const std::string& addr, int port) {
  Env env = clean_env();
  env["RANK"] = std::to_string(rank);
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_RANK"] = std::to_string(rank);
  env["LOCAL_WORLD_SIZE"] = std::to_string(world);
  env["TORCHELASTIC_RUN_ID"] = "kiln-test";
  env["MASTER_ADDR"] = addr;
  env["MASTER_PORT"] = std::to_string(port);
  return env;
}

std::unique_ptr<Process> start(const std::string& name, const std::vector<std::string>& argv, const Env& env) {
  return std::make_unique<Process>(argv, env, scratch(), scratch() / (name + ".out"), scratch() / (name + ".err"));
}

std::string out_of(const std::string& name) { return slurp(scratch() / (name + ".out")); }
std::string err_of(const std::string& name) { return slurp(scratch() / (name + ".err")); }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A short all-reduce table (1K..64K); `timeout_s` bounds the rendezvous and every collective.
std::vector<std::string> bench(int timeout_s = 60) {
  return {kKiln, "bench-comm", "--comm", "gloo", "-b", "1K", "-e", "64K", "-f", "4",
          "-n", "2", "-w", "1", "--timeout", std::to_string(timeout_s)};
}

std::vector<std::string> train(const fs::path& run_dir, double timeout_s) {
  return {kKiln, "train", "--config", kSample, "--set", "log.progress=never", "--set", "run.epochs=1",
          "--set", "data.train.limit=256", "--set", "comm.type=\"gloo\"", "--set",
          fmt::format("dist.timeout_s={}", timeout_s), "--run-dir", run_dir.string()};
}

/// The last "kiln: error: " line of a rank's stderr.
std::string error_line(const std::string& text) {
  const auto at = text.rfind("kiln: error: ");
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

}  // namespace

BOOST_AUTO_TEST_CASE(three_bench_ranks_meet_over_tcp_from_master_addr) {
  const int port = free_ports();
  std::vector<std::unique_ptr<Process>> ranks;
  // Rank 0 last: the others must wait and retry until its server is up.
  for (int r : {2, 1, 0}) ranks.push_back(start(fmt::format("bench{}", r), bench(), torchrun_env(r, 3, "127.0.0.2", port)));
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int r = 2 - static_cast<int>(i);
    BOOST_TEST(ranks[i]->wait_for(kWallClock).value_or(-1) == 0, "rank " << r << ": " << err_of(fmt::format("bench{}", r)));
  }
  const std::string table = out_of("bench0");
  BOOST_TEST(contains(table, "65536"), table);  // the last row of the nccl-tests table
  BOOST_TEST(contains(table, "# Out of bounds values : 0 OK"), table);
}

BOOST_AUTO_TEST_CASE(train_under_torchrun_agent_store_uses_the_next_port) {
  const int port = free_ports(2);  // MASTER_PORT for the agent store, MASTER_PORT + 1 for Kiln's
  // Stands in for torchrun's agent store, which holds MASTER_PORT when TORCHELASTIC_USE_AGENT_STORE=True.
  kiln::dist::TcpStoreServer agent(port);
  const fs::path run_dir = scratch() / "torchrun-run";
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    Env env = torchrun_env(r, 2, "127.0.0.3", port);
    env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    ranks.push_back(start(fmt::format("train{}", r), train(run_dir, 60), env));
  }
  for (int r = 0; r < 2; ++r) {
    BOOST_TEST(ranks[r]->wait_for(kWallClock).value_or(-1) == 0, "rank " << r << ": " << err_of(fmt::format("train{}", r)));
  }
  for (int r = 0; r < 2; ++r) {
    const std::string log = slurp(run_dir / fmt::format("logs/rank{}.log", r));
    BOOST_TEST(contains(log, "ranks from torchrun (RANK, WORLD_SIZE)"), log);
    BOOST_TEST(contains(log, fmt::format("dist      rendezvous tcp://127.0.0.3:{} (from MASTER_ADDR and MASTER_PORT + 1: "
                                         "torchrun's agent store holds MASTER_PORT)", port + 1)),
               log);
  }
  BOOST_TEST(fs::exists(run_dir / "metrics.jsonl"));
}

BOOST_AUTO_TEST_CASE(a_lone_rank_gives_up_naming_what_is_missing) {
  // Each also says, every --warn-after second before it gives up, what it is waiting for.
  const int port = free_ports();
  auto with_warnings = [] {
    auto args = bench(2);
    args.insert(args.end(), {"--warn-after", "1"});
    return args;
  };
  auto client = start("lone1", with_warnings(), torchrun_env(1, 2, "127.0.0.1", port));
  BOOST_TEST(client->wait_for(kWallClock).value_or(-1) == 1);
  const std::string e1 = error_line(err_of("lone1"));
  BOOST_TEST(contains(e1, fmt::format("rank 1 of 2 could not reach the rendezvous store tcp://127.0.0.1:{} (served by "
                                      "rank 0) within 2 s: Connection refused", port)),
             e1);
  // (How long "has tried for" says depends on the retries' back-off; not checked.)
  BOOST_TEST(contains(err_of("lone1"), "[dist] warning: rank 1 of 2 has tried for "), err_of("lone1"));
  BOOST_TEST(contains(err_of("lone1"), fmt::format(" to reach the rendezvous store tcp://127.0.0.1:{} (served by rank 0): "
                                                   "Connection refused",
                                                   port)),
             err_of("lone1"));

  auto server = start("lone0", with_warnings(), torchrun_env(0, 2, "127.0.0.1", port));
  BOOST_TEST(server->wait_for(kWallClock).value_or(-1) == 1);
  const std::string e0 = error_line(err_of("lone0"));
  BOOST_TEST(contains(e0, "waiting for rank 1 of 2"), e0);
  BOOST_TEST(contains(e0, fmt::format("in TCP store tcp://127.0.0.1:{}", port)), e0);
  BOOST_TEST(contains(err_of("lone0"), "[dist] warning: rank 0 has waited "), err_of("lone0"));
  BOOST_TEST(contains(err_of("lone0"), " at the rendezvous for rank 1 of 2 (missing keys: gloo/arrive/rank1 in TCP store "
                                       "tcp://127.0.0.1:"),
             err_of("lone0"));
  BOOST_TEST(contains(err_of("lone0"), "it gives up after 2 s (--timeout)"), err_of("lone0"));
}

BOOST_AUTO_TEST_CASE(rank0_killed_fails_the_waiting_ranks_at_once) {
  const int port = free_ports();
  // World of 3 with rank 2 never started: ranks 0 and 1 wait for it (timeout 10 minutes).
  // Rank 1 reaches the store at 127.0.0.5; rank 0 talks to its own server over 127.0.0.1.
  auto rank0 = start("dead0", bench(600), torchrun_env(0, 3, "127.0.0.5", port));
  auto rank1 = start("dead1", bench(600), torchrun_env(1, 3, "127.0.0.5", port));
  // Wait until rank 1 holds a connection to the store, then kill rank 0. /proc/net/tcp lists
  // the remote address as little-endian hex and state 01 for ESTABLISHED.
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  for (;;) {
    if (contains(slurp("/proc/net/tcp"), fmt::format("0500007F:{:04X} 01", port))) break;
    BOOST_TEST_REQUIRE((std::chrono::steady_clock::now() < deadline), "rank 1 never connected to rank 0's store");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(rank0->pid(), SIGKILL);
  rank0->wait_for(seconds(10));
  // Far less than the 600 s timeout: the closed connection ends the wait.
  BOOST_TEST(rank1->wait_for(seconds(60)).value_or(-1) == 1);
  const std::string e = error_line(err_of("dead1"));
  BOOST_TEST(contains(e, fmt::format("rank 1 of 3 lost its connection to the rendezvous store tcp://127.0.0.5:{} "
                                     "(served by rank 0)", port)),
             e);
}

BOOST_AUTO_TEST_CASE(mpirun_ranks_meet_through_mpi) {
  const std::string mpirun = "/usr/bin/mpirun";
  if (!fs::exists(mpirun)) {
    BOOST_TEST_MESSAGE("SKIPPED: " << mpirun << " is not installed (scripts/setup.sh installs openmpi-bin)");
    return;
  }
  const auto under_mpirun = [&](const std::vector<std::string>& command) {
    std::vector<std::string> argv = {mpirun, "-np", "2", "--oversubscribe", "--bind-to", "none"};
    if (::geteuid() == 0) argv.emplace_back("--allow-run-as-root");
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  };
  auto job = start("mpirun", under_mpirun(bench()), clean_env());
  BOOST_TEST(job->wait_for(kWallClock).value_or(-1) == 0, err_of("mpirun"));
  const std::string table = out_of("mpirun");
  BOOST_TEST(contains(table, "65536"), table);
  BOOST_TEST(contains(table, "# Out of bounds values : 0 OK"), table);

  // kiln train says where the store was: rank 0's address and the port it chose.
  const fs::path run_dir = scratch() / "mpirun-run";
  auto training = start("mpirun-train", under_mpirun(train(run_dir, 60)), clean_env());
  BOOST_TEST(training->wait_for(kWallClock).value_or(-1) == 0, err_of("mpirun-train"));
  for (int r = 0; r < 2; ++r) {
    const std::string log = slurp(run_dir / fmt::format("logs/rank{}.log", r));
    BOOST_TEST(contains(log, "ranks from openmpi (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)"), log);
    BOOST_TEST(contains(log, "dist      rendezvous mpi at tcp://"), log);
    BOOST_TEST(contains(log, "(from Open MPI: rank 0's store address sent with MPI_Bcast)"), log);
  }
}
