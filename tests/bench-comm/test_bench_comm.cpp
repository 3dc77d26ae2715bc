// `kiln bench-comm`: flag parsing, the nccl-tests table shape and #wrong = 0 with the `local`
// communicator in this process, --json, and (when the gloo plugin is built) two ranks started by
// --nproc through the test driver. Values and text are asserted, never timings.
#define BOOST_TEST_MODULE bench_comm
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/bench_comm_command.hpp"
#include "kiln/errors.hpp"

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
}

BOOST_AUTO_TEST_CASE(json_output) {
  const std::string text = run_local({"-b", "8", "-e", "16", "-f", "2", "-n", "1", "-w", "0", "--json"});
  BOOST_TEST(text.rfind("{\"command\": \"bench-comm\", \"collective\": \"all_reduce\", \"comm\": \"local\"", 0) == 0);
  BOOST_TEST(contains(text, "\"results\": [{\"size\": 8, \"count\": 2, \"out_of_place\": {\"time_us\": "));
  BOOST_TEST(contains(text, "{\"size\": 16, \"count\": 4,"));
  BOOST_TEST(contains(text, "\"wrong\": 0}"));
  BOOST_TEST(contains(text, "\"out_of_bounds\": 0, \"avg_busbw_gbs\": 0.0000}"));
  BOOST_TEST(!contains(text, "# nThread"));
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
  const std::string cmd = std::string(KILN_BENCH_DRIVER) + " bench-comm --comm gloo --nproc 2 -b 8 -e 1M -f 8 -n 3 -w 1 " +
                          "--timeout 60 --plugin-path " + KILN_TEST_PLUGIN_DIR + " 2>&1";
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
}
#endif
