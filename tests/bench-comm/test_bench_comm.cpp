// `kiln bench-comm`: flag parsing, the nccl-tests table shape and #wrong = 0 with the `local`
// communicator in this process, --json and -J in nccl-tests' JSON schema, -g, and (when the gloo plugin is built) two ranks started by
// --nproc through the test driver. Values and text are asserted, never timings.
#define KILN_TEST_MODULE bench_comm
#include "kiln_test_main.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/bench_comm_command.hpp"
#include "kiln/errors.hpp"
#include "../integration/json_lite.hpp"

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// Rows of the table (lines not starting with '#').
std::vector<std::vector<std::string>> rows_of(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& l : lines_of(text)) {
    if (!l.empty() && l[0] != '#') rows.push_back(words_of(l));
  }
  return rows;
}

std::string run_local(std::vector<std::string> args, int* rc = nullptr) {
  std::vector<std::string> full = {"--comm", "local", "--plugin-path", KILN_TEST_PLUGIN_DIR};
  full.insert(full.end(), args.begin(), args.end());
  std::ostringstream out;
  const int code = kiln::cli::run_bench_comm_command(full, {}, out);
  if (rc) *rc = code;
  return out.str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(sizes_take_k_m_g_suffixes) {
  using kiln::cli::parse_byte_size;
  BOOST_TEST(parse_byte_size("8", "-b") == 8);
  BOOST_TEST(parse_byte_size("64K", "-b") == 65536);
  BOOST_TEST(parse_byte_size("32M", "-b") == 33554432);
  BOOST_TEST(parse_byte_size("1G", "-e") == 1073741824LL);
  BOOST_TEST(parse_byte_size("2m", "-e") == 2097152);
  BOOST_TEST(parse_byte_size("4KB", "-e") == 4096);
  const std::string msg = message_of([] { parse_byte_size("12Q", "-b/--minbytes"); });
  BOOST_TEST(contains(msg, "-b/--minbytes '12Q' is not a size"));
  BOOST_CHECK_THROW(parse_byte_size("-3", "-b"), kiln::ConfigError);
  BOOST_CHECK_THROW(parse_byte_size("", "-b"), kiln::ConfigError);
}

BOOST_AUTO_TEST_CASE(local_world_one_prints_the_nccl_tests_table) {
  int rc = -1;
  const std::string text = run_local({"-b", "8", "-e", "64K", "-f", "4", "-n", "2", "-w", "1"}, &rc);
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(rc == 0);
  const auto lines = lines_of(text);
  BOOST_REQUIRE(!lines.empty());
  BOOST_TEST(lines[0] == "# nThread 1 nGpus 1 minBytes 8 maxBytes 65536 step: 4(factor) warmup iters: 1 iters: 2 "
                         "agg iters: 1 validation: 1 graph: 0");
  BOOST_TEST(contains(text, "# Using devices\n#  Rank  0 Group  0 Pid "));
  BOOST_TEST(contains(text, "out-of-place = copy input to output, then in-place all_reduce of output"));
  BOOST_TEST(contains(text, "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
                            "time   algbw   busbw #wrong\n"));
  BOOST_TEST(contains(text, "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
                            "(us)  (GB/s)  (GB/s)       \n"));
  const auto rows = rows_of(text);
  const std::vector<std::string> sizes = {"8", "32", "128", "512", "2048", "8192", "32768"};
  BOOST_REQUIRE(rows.size() == sizes.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    BOOST_REQUIRE(rows[i].size() == 13u);
    BOOST_TEST(rows[i][0] == sizes[i]);
    BOOST_TEST(std::stoll(rows[i][1]) == std::stoll(sizes[i]) / 4);  // float elements
    BOOST_TEST(rows[i][2] == "float");
    BOOST_TEST(rows[i][3] == "sum");
    BOOST_TEST(rows[i][4] == "-1");
    BOOST_TEST(rows[i][7] == "0.00");  // busbw = algbw * 2(n-1)/n = 0 for one rank
    BOOST_TEST(rows[i][8] == "0");     // #wrong out-of-place
    BOOST_TEST(rows[i][11] == "0.00");
    BOOST_TEST(rows[i][12] == "0");    // #wrong in-place
  }
  BOOST_TEST(contains(text, "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0\n"));
}

BOOST_AUTO_TEST_CASE(row_columns_line_up_with_nccl_tests) {
  const std::string text = run_local({"-b", "1M", "-e", "1M", "-n", "1", "-w", "0"});
  const auto rows = rows_of(text);
  BOOST_REQUIRE(rows.size() == 1u);
  for (const auto& l : lines_of(text)) {
    if (!l.empty() && l[0] != '#') {
      // "%12li  %12li  %8s  %6s  %6i" then two halves of "  %7s  %6.2f  %6.2f  %5s".
      BOOST_TEST(l.substr(0, 52) == "     1048576        262144     float     sum      -1");
      BOOST_TEST(l.substr(l.size() - 7) == "      0");
    }
  }
}

BOOST_AUTO_TEST_CASE(stepbytes_datatypes_and_ops_check_clean) {
  for (const char* d : {"float", "half", "bfloat16", "double"}) {
    for (const char* op : {"sum", "avg", "max", "min"}) {
      int rc = -1;
      const std::string text = run_local({"-b", "1K", "-e", "3K", "-i", "1K", "-n", "1", "-w", "0", "-d", d, "-o", op}, &rc);
      BOOST_TEST(rc == 0, d << " " << op);
      const auto rows = rows_of(text);
      BOOST_REQUIRE(rows.size() == 3u);
      BOOST_TEST(rows[0][2] == d);
      BOOST_TEST(rows[0][3] == op);
      BOOST_TEST(rows[2][8] == "0");
      BOOST_TEST(contains(text, "step: 1024(bytes)"));
    }
  }
}

BOOST_AUTO_TEST_CASE(check_zero_prints_na) {
  const std::string text = run_local({"-b", "64", "-e", "64", "-c", "0", "-n", "1", "-w", "0"});
  const auto rows = rows_of(text);
  BOOST_REQUIRE(rows.size() == 1u);
  BOOST_TEST(rows[0][8] == "N/A");
  BOOST_TEST(rows[0][12] == "N/A");
  BOOST_TEST(contains(text, "validation: 0"));
  // In the JSON report an unchecked #wrong is null, as nccl-tests writes it.
  const auto doc = kiln::test::json::parse(run_local({"-b", "64", "-e", "64", "-c", "0", "-n", "1", "-w", "0", "--json"}));
  BOOST_TEST(doc.at("config").at("validation").number == 0);
  BOOST_TEST((doc.at("results").items.at(0).at("in_place").at("nwrong").kind == kiln::test::json::Value::Kind::null));
}

namespace {

namespace json = kiln::test::json;

/// Checks one report against nccl-tests' JSON schema (version 2) and the run's own figures.
void check_nccl_tests_schema(const json::Value& doc, const std::vector<long long>& sizes, int iters, int warmup) {
  BOOST_TEST(doc.at("version").number == 2);
  BOOST_TEST(doc.at("start_time").string.size() == 19u);  // "%Y-%m-%d %H:%M:%S"
  BOOST_TEST(doc.at("end_time").string.size() == 19u);
  BOOST_TEST(doc.at("end_time").string >= doc.at("start_time").string);
  BOOST_REQUIRE(doc.at("args").items.size() >= 2u);
  BOOST_TEST(doc.at("args").items[1].string == "bench-comm");
  BOOST_TEST((doc.at("env").kind == json::Value::Kind::array));
  BOOST_TEST((doc.at("nccl_version").kind == json::Value::Kind::null));
  const json::Value& config = doc.at("config");
  BOOST_TEST(config.at("nthreads").number == 1);
  BOOST_TEST(config.at("ngpus").number == 1);
  BOOST_TEST(config.at("minimum_bytes").number == static_cast<double>(sizes.front()));
  BOOST_TEST(config.at("maximum_bytes").number == static_cast<double>(sizes.back()));
  BOOST_TEST(config.at("step_factor").number == 2);
  BOOST_TEST(config.find("step_bytes") == nullptr);
  BOOST_TEST(config.at("warmup_iters").number == warmup);
  BOOST_TEST(config.at("iterations").number == iters);
  BOOST_TEST(config.at("aggregated_iterations").number == 1);
  BOOST_TEST(config.at("validation").number == 1);
  BOOST_TEST(config.at("graph").number == 0);
  BOOST_TEST(config.at("blocking_collectives").string == "true");  // nccl-tests writes booleans as strings
  BOOST_TEST(config.at("per_iter_timing").string == "false");
  BOOST_TEST(config.at("parallel_init").string == "false");
  const auto& devices = config.at("devices").items;
  BOOST_REQUIRE(devices.size() == 1u);
  BOOST_TEST(devices[0].at("rank").number == 0);
  BOOST_TEST(devices[0].at("group").number == 0);
  BOOST_TEST(devices[0].at("pid").number > 0);
  BOOST_TEST(!devices[0].at("hostname").string.empty());
  BOOST_TEST(devices[0].at("device_hex").string == "cpu");
  const auto& results = doc.at("results").items;
  BOOST_REQUIRE(results.size() == sizes.size());
  double busbw_sum = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const json::Value& row = results[i];
    BOOST_TEST(row.at("size").number == static_cast<double>(sizes[i]));
    BOOST_TEST(row.at("count").number == static_cast<double>(sizes[i] / 4));
    BOOST_TEST(row.at("type").string == "float");
    BOOST_TEST(row.at("redop").string == "sum");
    BOOST_TEST(row.at("root").string == "    -1");  // the table's "%6i" text, as nccl-tests writes it
    BOOST_TEST(row.at("actual_iterations").number == iters);
    BOOST_TEST(row.at("experiment_name").string == "");
    for (const char* half : {"out_of_place", "in_place"}) {
      const json::Value& h = row.at(half);
      BOOST_TEST(h.at("time").number > 0);
      // alg_bw = size / time (GB/s, time in us); 6 decimals written, so compare loosely.
      BOOST_TEST(std::abs(h.at("alg_bw").number - sizes[i] / (h.at("time").number * 1e3)) <= 2e-6);
      BOOST_TEST(h.at("bus_bw").number == 0);  // 2(n-1)/n = 0 for one rank
      BOOST_TEST(h.at("nwrong").number == 0);
      busbw_sum += h.at("bus_bw").number;
    }
  }
  BOOST_TEST(doc.at("out_of_bounds").at("count").number == 0);
  BOOST_TEST(doc.at("out_of_bounds").at("okay").string == "true");
  BOOST_TEST(doc.at("average_bus_bandwidth").at("bandwidth").number == busbw_sum / (2 * sizes.size()));
  BOOST_TEST(doc.at("average_bus_bandwidth").at("okay").string == "unchecked");
  BOOST_TEST(doc.at("errors").items.empty());
  const json::Value& kiln = doc.at("kiln");
  BOOST_TEST(kiln.at("collective").string == "all_reduce");
  BOOST_TEST(kiln.at("comm").string == "local");
  BOOST_TEST(kiln.at("backend").string == "cpu");
  BOOST_TEST(kiln.at("world_size").number == 1);
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_output_has_the_nccl_tests_schema) {
  int rc = -1;
  const std::string text = run_local({"-b", "8", "-e", "32", "-f", "2", "-n", "2", "-w", "1", "-g", "1", "--json"}, &rc);
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(rc == 0);
  BOOST_TEST(!contains(text, "# nThread"));
  const json::Value doc = json::parse(text);
  check_nccl_tests_schema(doc, {8, 16, 32}, 2, 1);
  BOOST_TEST(doc.at("args").items.back().string == "--json");
}

BOOST_AUTO_TEST_CASE(output_file_writes_the_json_next_to_the_table) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln-bench-json-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto file = dir / "allreduce.json";
  int rc = -1;
  const std::string text = run_local({"-b", "8", "-e", "32", "-f", "2", "-n", "1", "-w", "0", "-J", file.string()}, &rc);
  BOOST_TEST(rc == 0);
  BOOST_TEST(contains(text, "# Writing JSON output to " + file.string() + "\n"));
  BOOST_TEST(contains(text, "# Out of bounds values : 0 OK"));  // the table is still printed
  check_nccl_tests_schema(json::parse(read_file(file)), {8, 16, 32}, 1, 0);
  // An existing file is kept, and FILE.0 written instead (nccl-tests' rule).
  const std::string first = read_file(file);
  const std::string again = run_local({"-b", "8", "-e", "32", "-f", "2", "-n", "1", "-w", "0", "-J", file.string()});
  BOOST_TEST(contains(again, "# Writing JSON output to " + file.string() + ".0\n"));
  BOOST_TEST(read_file(file) == first);
  check_nccl_tests_schema(json::parse(read_file(file.string() + ".0")), {8, 16, 32}, 1, 0);
  const std::string bad = message_of([&] { run_local({"-b", "8", "-e", "8", "-J", (dir / "no/such/dir.json").string()}); });
  BOOST_TEST(contains(bad, "-J/--output_file: cannot create"), bad);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(gpus_per_process_other_than_one_is_refused) {
  const std::string msg = message_of([] { run_local({"-g", "2", "-b", "8", "-e", "8"}); });
  BOOST_TEST(contains(msg, "-g/--ngpus 2: Kiln drives one device per rank, so only -g 1 is valid"), msg);
  BOOST_TEST(contains(message_of([] { run_local({"-g", "0"}); }), "only -g 1 is valid"));
}

BOOST_AUTO_TEST_CASE(bad_flags_are_config_errors) {
  BOOST_TEST(contains(message_of([] { run_local({"-d", "int8"}); }),
                      "-d/--datatype 'int8' is not one of float, half, bfloat16, double"));
  BOOST_TEST(contains(message_of([] { run_local({"-o", "prod"}); }), "-o/--op 'prod' is not one of sum, avg, max, min"));
  BOOST_TEST(contains(message_of([] { run_local({"-b", "64M", "-e", "1M"}); }), "-e/--maxbytes 1048576 is below"));
  BOOST_TEST(contains(message_of([] { run_local({"-f", "1"}); }), "-f/--stepfactor 1 must be at least 2"));
  BOOST_TEST(contains(message_of([] { run_local({"--set", "comm.nope=1"}); }), "nope"));
  std::ostringstream out;
  BOOST_CHECK_THROW(kiln::cli::run_bench_comm_command({"-b", "8"}, {}, out), std::exception);  // --comm missing
  const std::string unknown = message_of([] {
    std::ostringstream o;
    kiln::cli::run_bench_comm_command({"--comm", "glooo", "--plugin-path", KILN_TEST_PLUGIN_DIR}, {}, o);
  });
  BOOST_TEST(contains(unknown, "no communicator plugin named 'glooo'"), unknown);
}

BOOST_AUTO_TEST_CASE(world_two_without_rendezvous_says_how) {
  const std::string msg = message_of([] { run_local({"--rank", "1", "--world-size", "2", "-b", "8", "-e", "8"}); });
  BOOST_TEST(contains(msg, "needs a rendezvous: export KILN_RENDEZVOUS=tcp://<rank 0's host>:<port> or file:<dir>"), msg);
  BOOST_TEST(contains(msg, "--nproc 2"));
}

#ifdef KILN_BENCH_HAVE_GLOO
BOOST_AUTO_TEST_CASE(gloo_two_ranks_through_nproc) {
  const auto report = std::filesystem::temp_directory_path() / ("kiln-bench-gloo-" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(report);
  const std::string cmd = std::string(KILN_BENCH_DRIVER) + " bench-comm --comm gloo --nproc 2 -b 8 -e 1M -f 8 -n 3 -w 1 " +
                          "-g 1 -J " + report.string() + " --timeout 60 --plugin-path " + KILN_TEST_PLUGIN_DIR + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof(buf), p)) text.append(buf, n);
  const int status = ::pclose(p);
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(status == 0);
  BOOST_TEST(contains(text, "#  Rank  0 Group  0 Pid "));
  BOOST_TEST(contains(text, "#  Rank  1 Group  0 Pid "));
  BOOST_TEST(contains(text, "2 rank(s) (ranks from kiln --nproc (RANK, WORLD_SIZE))"), text);
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : rows_of(text)) {
    if (r.size() == 13u) rows.push_back(r);
  }
  const std::vector<std::string> sizes = {"8", "64", "512", "4096", "32768", "262144"};
  BOOST_REQUIRE(rows.size() == sizes.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    BOOST_TEST(rows[i][0] == sizes[i]);
    BOOST_TEST(rows[i][8] == "0");
    BOOST_TEST(rows[i][12] == "0");
  }
  // busbw = algbw * 2(n-1)/n = algbw for two ranks.
  BOOST_TEST(rows.back()[6] == rows.back()[7]);
  BOOST_TEST(contains(text, "# Out of bounds values : 0 OK"));

  // The -J report of the two ranks: one device per rank, the table's rows, busbw = algbw.
  const json::Value doc = json::parse(read_file(report));
  std::filesystem::remove(report);
  const auto& devices = doc.at("config").at("devices").items;
  BOOST_REQUIRE(devices.size() == 2u);
  BOOST_TEST(devices[0].at("rank").number == 0);
  BOOST_TEST(devices[1].at("rank").number == 1);
  BOOST_TEST(devices[0].at("pid").number != devices[1].at("pid").number);
  BOOST_TEST(doc.at("kiln").at("world_size").number == 2);
  BOOST_TEST(doc.at("kiln").at("comm").string == "gloo");
  const auto& results = doc.at("results").items;
  BOOST_REQUIRE(results.size() == sizes.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    BOOST_TEST(results[i].at("size").number == std::stod(sizes[i]));
    for (const char* half : {"out_of_place", "in_place"}) {
      const json::Value& h = results[i].at(half);
      BOOST_TEST(h.at("bus_bw").number == h.at("alg_bw").number);
      BOOST_TEST(h.at("nwrong").number == 0);
    }
  }
  BOOST_TEST(doc.at("out_of_bounds").at("okay").string == "true");
}

/// Runs the driver's bench-comm as `rank` of 2 meeting in `dir` (a file: store); returns its status.
int bench_rank_in(const std::filesystem::path& dir, int rank, int timeout_s) {
  const std::string cmd = "KILN_RENDEZVOUS=file:" + dir.string() + " " + KILN_BENCH_DRIVER +
                          " bench-comm --comm gloo --rank " + std::to_string(rank) +
                          " --world-size 2 -b 8 -e 64 -f 8 -n 2 -w 1 --warn-after 0 --timeout " +
                          std::to_string(timeout_s) + " --plugin-path " + KILN_TEST_PLUGIN_DIR + " > /dev/null 2>&1";
  return std::system(cmd.c_str());
}

/// The store's files in `dir` (k_* and l_*).
std::size_t store_files_in(const std::filesystem::path& dir) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    n += name.rfind("k_", 0) == 0 || name.rfind("l_", 0) == 0;
  }
  return n;
}

// A file: directory serves run after run (kiln/dist/stores.hpp): emptied after a run, and by a
// failed start -- rank 1 alone removes the keys it set when it gives up, rank 0 alone all of them.
BOOST_AUTO_TEST_CASE(a_file_rendezvous_directory_is_left_empty) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln-bench-rdzv-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (int run = 0; run < 2; ++run) {
    int status0 = -1;
    std::thread rank0([&] { status0 = bench_rank_in(dir, 0, 60); });
    BOOST_TEST(bench_rank_in(dir, 1, 60) == 0, "run " << run);
    rank0.join();
    BOOST_TEST(status0 == 0, "run " << run);
    BOOST_TEST(store_files_in(dir) == 0u, "run " << run);
  }
  BOOST_TEST(bench_rank_in(dir, 1, 1) != 0);
  BOOST_TEST(store_files_in(dir) == 0u);
  BOOST_TEST(bench_rank_in(dir, 0, 1) != 0);
  BOOST_TEST(store_files_in(dir) == 0u);
  std::filesystem::remove_all(dir);
}
#endif
