// metrics.jsonl records (JSON escaping, non-finite numbers as null, integers vs floats, key
// order, append + flush), io::BufferOut (the signal handlers' writer) and the run directory
// (refuses an old run, makes fresh default dirs, atomic writes). Every test works in its own
// temporary directory.
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include <fcntl.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <unistd.h>

#include "kiln/errors.hpp"
#include "kiln/io/run_status.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/json.hpp"
#include "kiln/io/metrics_writer.hpp"
#include "kiln/io/run_dir.hpp"
#include "kiln/io/run_dir_claim.hpp"
#include "kiln/io/text_out.hpp"
#include "kiln/train/run.hpp"
#include "../nn/nn_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::io::MetricsRecord;

/// A fresh empty directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / fmt::format("kiln-test-train-{}-{}", ::getpid(), counter()++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

BOOST_AUTO_TEST_CASE(record_types_and_order) {
  MetricsRecord r;
  r.add("epoch", std::int64_t{3}).add("split", std::string("train")).add("loss", 0.25).add("lr", 1e-3)
      .add("big", std::int64_t{-9007199254740993}).add("tiny", 1.5e-30);
  BOOST_TEST(r.to_json() ==
             R"({"epoch": 3, "split": "train", "loss": 0.25, "lr": 0.001, "big": -9007199254740993, "tiny": 1.5e-30})");
}

// A float field must stay a float when its value is whole (accuracy 1.0, lr 1.0), or readers
// that type columns from the JSON (Python's json, pandas) see an int in one record and a float
// in the next; integers are written without a decimal point.
BOOST_AUTO_TEST_CASE(whole_doubles_keep_a_decimal_point) {
  MetricsRecord r;
  r.add("accuracy", 1.0).add("samples", std::int64_t{1});
  BOOST_TEST(r.to_json() == R"({"accuracy": 1.0, "samples": 1})");
  BOOST_TEST(MetricsRecord().add("loss", 0.0).to_json() == R"({"loss": 0.0})");
}

BOOST_AUTO_TEST_CASE(doubles_round_trip) {
  const double v = 0.1 + 0.2;  // 0.30000000000000004: needs 17 significant digits
  MetricsRecord r;
  r.add("x", v);
  const std::string json = r.to_json();
  const std::string number = json.substr(json.find(": ") + 2, json.size() - json.find(": ") - 3);
  BOOST_TEST(std::stod(number) == v);
}

BOOST_AUTO_TEST_CASE(non_finite_numbers_are_null) {
  MetricsRecord r;
  r.add("nan", std::numeric_limits<double>::quiet_NaN())
      .add("inf", std::numeric_limits<double>::infinity())
      .add("ninf", -std::numeric_limits<double>::infinity());
  BOOST_TEST(r.to_json() == R"({"nan": null, "inf": null, "ninf": null})");
}

BOOST_AUTO_TEST_CASE(strings_and_keys_are_escaped) {
  MetricsRecord r;
  r.add("quote\"key", std::string("a\"b\\c\nd\te\rf\x01g/é"));
  BOOST_TEST(r.to_json() == "{\"quote\\\"key\": \"a\\\"b\\\\c\\nd\\te\\rf\\u0001g/é\"}");
  BOOST_TEST(MetricsRecord().to_json() == "{}");
}

// io::json_quoted is the one JSON string escape of every file Kiln writes by hand (metrics,
// plugins --json, bench-comm JSON, safetensors headers, profiles): every byte survives a parse.
BOOST_AUTO_TEST_CASE(json_quoted_round_trips_every_ascii_byte) {
  std::string all;
  for (int c = 0; c < 0x80; ++c) all += static_cast<char>(c);
  all += "é";
  const std::string quoted = kiln::io::json_quoted(all);
  for (const char c : quoted) BOOST_TEST(static_cast<unsigned char>(c) >= 0x20, "raw control byte in " << quoted);
  BOOST_TEST(kiln::io::parse_json(quoted, "quoted").text == all);
  BOOST_TEST(kiln::io::json_quoted("\b\f\n\r\t\x1f") == R"("\b\f\n\r\t\u001f")");
}

// io::BufferOut is how a fatal-signal handler writes (no allocation): into a fixed buffer that is
// written out whenever it fills, or, without a file descriptor, cut short at its end.
BOOST_AUTO_TEST_CASE(buffer_out_writes_through_a_small_buffer_or_cuts_short_without_a_file) {
  char small[8];
  kiln::io::BufferOut cut(small, sizeof(small));
  cut << "epoch " << std::int64_t{-12345} << " done";
  BOOST_TEST(cut.text() == "epoch -1");
  BOOST_TEST(cut.ok());

  TempDir tmp;
  const fs::path file = tmp.path / "out.txt";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  BOOST_TEST_REQUIRE(fd >= 0);
  kiln::io::BufferOut out(small, sizeof(small), fd);
  std::string expected;
  for (int i = 0; i < 50; ++i) {
    out << "line " << i << " at ";
    out.hex(static_cast<std::uintptr_t>(i) * 4096) << "\n";
    expected += fmt::format("line {} at {:#x}\n", i, i * 4096);
  }
  kiln::io::put_json_quoted(out, "a \"quoted\" text\n");
  expected += "\"a \\\"quoted\\\" text\\n\"";
  out.flush();
  ::close(fd);
  BOOST_TEST(out.ok());
  std::ifstream in(file, std::ios::binary);
  BOOST_TEST(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) == expected);

  const int read_only = ::open(file.c_str(), O_RDONLY);  // write(2) fails on it: EBADF
  BOOST_TEST_REQUIRE(read_only >= 0);
  kiln::io::BufferOut broken(small, sizeof(small), read_only);
  broken << "more than eight bytes";
  ::close(read_only);
  BOOST_TEST(!broken.ok());
}

// JSON is UTF-8 (RFC 8259): the reader refuses any other bytes in a string, naming where, so a
// damaged safetensors header cannot put them into an error message; the writer never emits them.
BOOST_AUTO_TEST_CASE(json_strings_are_utf8_both_ways) {
  using kiln::io::parse_json;
  const auto refusal = [](const std::string& text) {
    try {
      parse_json(text, "header");
    } catch (const kiln::DataError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Well-formed sequences of 2, 3 and 4 bytes, and the same code points as escapes (a pair for
  // the one past U+FFFF).
  BOOST_TEST(parse_json("\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5\"", "header").text == "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");
  BOOST_TEST(parse_json(R"("\u00e9 \u20ac \ud83d\udd25")", "header").text == "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");
  BOOST_TEST(refusal("{\"ab\xff" "cd\": 1}") == "header: invalid JSON at byte 4: invalid UTF-8 in string");
  for (const char* bad : {"\"\x80\"", "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
                          "\"\xc3\"", "\"\xe2\x82\""}) {
    BOOST_TEST(refusal(bad).find("invalid UTF-8 in string") != std::string::npos, bad);
  }
  for (const char* bad : {R"("\ud83d")", R"("\ud83d\u0041")", R"("\udd25")"}) {
    BOOST_TEST(refusal(bad).find("unpaired surrogate") != std::string::npos, bad);
  }
  // A Latin-1 byte (a file name, say) is written as the code point of its value, and reads back.
  const std::string quoted = kiln::io::json_quoted("caf\xe9 \xc3\xa9");
  BOOST_TEST(quoted == "\"caf\\u00e9 \xc3\xa9\"");
  BOOST_TEST(parse_json(quoted, "quoted").text == "caf\xc3\xa9 \xc3\xa9");
}

BOOST_AUTO_TEST_CASE(writer_appends_one_line_per_record) {
  TempDir tmp;
  const fs::path file = tmp.path / "metrics.jsonl";
  {
    // Every record starts with its wall_time (Unix seconds), from the clock the writer is given.
    kiln::io::MetricsWriter w(file, [] { return 1.5; });
    BOOST_TEST(w.path() == file);
    w.write(MetricsRecord().add("epoch", std::int64_t{1}));
    // Flushed after every record: readable while the writer is still open.
    BOOST_TEST(slurp(file) == "{\"wall_time\": 1.5, \"epoch\": 1}\n");
  }
  {
    kiln::io::MetricsWriter w(file, [] { return 2.0; });  // appends, never truncates
    w.write(MetricsRecord().add("epoch", std::int64_t{2}));
  }
  BOOST_TEST(slurp(file) == "{\"wall_time\": 1.5, \"epoch\": 1}\n{\"wall_time\": 2.0, \"epoch\": 2}\n");
  const std::string err = kiln::test::error_text<kiln::IoError>(
      [&] { kiln::io::MetricsWriter w(tmp.path / "missing" / "metrics.jsonl"); });
  BOOST_TEST(err.find("cannot open " + (tmp.path / "missing" / "metrics.jsonl").string()) == 0);
}

/// What `kiln train`'s rank 0 does with --run-dir (or none): claims the folder, makes logs/ in it,
/// and (here) lets the lock go at once.
fs::path prepare_run_dir(const std::string& requested) {
  const fs::path dir = kiln::io::RunDirClaim::take(requested, kiln::io::RunDirMode::fresh).dir();
  kiln::io::create_run_dir(dir);
  return dir;
}

BOOST_AUTO_TEST_CASE(run_dir_refuses_an_old_run) {
  TempDir tmp;
  const fs::path dir = tmp.path / "run";
  fs::create_directories(dir);
  { std::ofstream(dir / "metrics.jsonl") << "{\"epoch\": 1}\n"; }
  BOOST_TEST(kiln::test::error_text<kiln::IoError>([&] { prepare_run_dir(dir.string()); }) ==
             "run directory " + dir.string() +
                 " already holds a run (metrics.jsonl); choose another --run-dir or move the old run away");
  BOOST_TEST(slurp(dir / "metrics.jsonl") == "{\"epoch\": 1}\n");  // untouched
  BOOST_TEST(!fs::exists(dir / "logs"));
}

BOOST_AUTO_TEST_CASE(run_dir_explicit_is_created_or_reused_when_empty) {
  TempDir tmp;
  const fs::path dir = tmp.path / "a" / "b";
  BOOST_TEST(prepare_run_dir(dir.string()) == dir);
  BOOST_TEST(fs::is_directory(dir / "logs"));
  BOOST_TEST(prepare_run_dir(dir.string()) == dir);  // no metrics.jsonl yet: fine
}

BOOST_AUTO_TEST_CASE(run_dir_default_is_fresh_under_runs) {
  TempDir tmp;
  const fs::path old_cwd = fs::current_path();
  fs::current_path(tmp.path);
  fs::path first, second;
  try {
    first = prepare_run_dir("");
    second = prepare_run_dir("");
  } catch (...) {
    fs::current_path(old_cwd);
    throw;
  }
  fs::current_path(old_cwd);
  BOOST_TEST(first.parent_path() == fs::path("runs"));
  BOOST_TEST(second.parent_path() == fs::path("runs"));
  BOOST_TEST(first != second);  // the second gets a -2 suffix if made in the same second
  // runs/YYYYmmdd-HHMMSS
  const std::string stamp = first.filename().string();
  BOOST_TEST(stamp.size() == 15u);
  BOOST_TEST(stamp[8] == '-');
  BOOST_TEST(fs::is_directory(tmp.path / first / "logs"));
  BOOST_TEST(fs::is_directory(tmp.path / second / "logs"));
}

// --run-dir reaches the config as a TOML string override: quotes, backslashes and control
// characters must survive it (a raw newline once made the override unparseable, and the value
// fell back to a bare string, quotes included: a directory named `"/tmp/.../a` relative to the
// working directory).
BOOST_AUTO_TEST_CASE(run_dir_with_quotes_backslashes_and_a_newline_is_used_as_given) {
  TempDir tmp;
  const fs::path config = tmp.path / "run.toml";
  std::ofstream(config) << "[run]\nepochs = 1\n[backend]\ntype = \"cpu\"\nthreads = 1\n[model]\ntype = \"mlp\"\n"
                           "in_features = 6\nhidden = [8]\nnum_classes = 4\n[data.train]\ntype = \"synthetic\"\nshape = [6]\n"
                           "classes = 4\ncount = 8\n[loader]\nbatch = 4\n[comm]\ntype = \"local\"\n"
                           "[precision]\ntype = \"fp32\"\n[optimizer]\ntype = \"sgd\"\nlr = 0.01\n";
  const fs::path run_dir = tmp.path / "a \"quoted\" \\ back\nslash\ttab";
  kiln::train::TrainCommand command;
  command.config = config;
  command.run_dir = run_dir.string();
  command.plugin_dirs = {fs::path(KILN_TEST_PLUGIN_DIR)};
  kiln::train::run_training(command);
  BOOST_TEST(fs::is_regular_file(run_dir / "config.toml"));
  BOOST_TEST(fs::is_regular_file(run_dir / "metrics.jsonl"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path)) ++entries;
  BOOST_TEST(entries == 2u, "only run.toml and the run directory: " << entries << " entries");
}

BOOST_AUTO_TEST_CASE(atomic_write_replaces_whole_file) {
  TempDir tmp;
  const fs::path file = tmp.path / "config.toml";
  kiln::io::write_file_atomic(file, "a = 1\n");
  kiln::io::write_file_atomic(file, "b = 2\n");
  BOOST_TEST(slurp(file) == "b = 2\n");
  BOOST_TEST(!fs::exists(tmp.path / "config.toml.tmp"));
  BOOST_CHECK_THROW(kiln::io::write_file_atomic(tmp.path / "no" / "such" / "dir.toml", "x"), kiln::IoError);
}

// A full disk, made by pointing the temp file the write goes through at /dev/full (every write
// to it fails with ENOSPC): the old file stays, the temp is gone, and the message gives the
// reason and how far the write got.
BOOST_AUTO_TEST_CASE(atomic_write_on_a_full_disk_keeps_the_old_file_and_says_why) {
  TempDir tmp;
  const fs::path file = tmp.path / "model.safetensors";
  const fs::path temp = tmp.path / "model.safetensors.tmp";
  kiln::io::write_file_atomic(file, "old contents");
  fs::create_symlink("/dev/full", temp);
  const std::string message =
      kiln::test::error_text<kiln::IoError>([&] { kiln::io::write_file_atomic(file, std::string(100000, 'x')); });
  BOOST_TEST(message == "cannot write " + temp.string() +
                            " (0 of 100000 bytes written): No space left on device; the file it replaces is unchanged");
  BOOST_TEST(slurp(file) == "old contents");
  BOOST_TEST(!fs::exists(fs::symlink_status(temp)));
}

}  // namespace

// status.json (run_status.hpp): written whole, read back field for field; a file that is not one
// (another tool's, or damaged) reads as none, so the supervisor never rewrites it.
BOOST_AUTO_TEST_CASE(run_status_round_trips_and_a_foreign_file_reads_as_none) {
  TempDir dir;
  BOOST_TEST(!kiln::io::read_run_status(dir.path).has_value());
  kiln::io::RunStatus s = kiln::io::run_status_now("failed", 2, 3, 1874);
  s.message = "epoch 3/3 step 2/937: the training loss is \"nan\"\n";
  s.final_test_accuracy = 0.85650000000000004;
  kiln::io::write_run_status(dir.path, s);
  const auto back = kiln::io::read_run_status(dir.path);
  BOOST_TEST_REQUIRE(back.has_value());
  BOOST_TEST(back->state == "failed");
  BOOST_TEST(back->epoch == 2);
  BOOST_TEST(back->epochs == 3);
  BOOST_TEST(back->step == 1874);
  BOOST_TEST(back->message == s.message);
  BOOST_TEST(back->final_test_accuracy.value() == 0.85650000000000004);
  BOOST_TEST(back->pid == static_cast<std::int64_t>(::getpid()));
  BOOST_TEST(back->host == s.host);
  BOOST_TEST(back->updated >= back->started);
  BOOST_TEST(!fs::exists(dir.path / "status.json.tmp"));

  s.final_test_accuracy.reset();
  kiln::io::write_run_status(dir.path, s);
  BOOST_TEST(!kiln::io::read_run_status(dir.path)->final_test_accuracy.has_value());

  std::string huge = kiln::io::run_status_json(s);  // a hand-edited count no integer holds
  huge.replace(huge.find("\"epoch\": 2"), 10, "\"epoch\": 1e300");
  std::string negative = kiln::io::run_status_json(s);
  negative.replace(negative.find("\"step\": 1874"), 12, "\"step\": -1");
  for (const std::string& foreign : {std::string(), std::string("[]"), std::string("{\"state\": 3}"),
                                     std::string("{\"state\": \"running\"}"), std::string("{\"state\": \"running\", "),
                                     huge, negative}) {
    std::ofstream(dir.path / "status.json") << foreign;
    BOOST_TEST(!kiln::io::read_run_status(dir.path).has_value(), foreign);
  }
  // The same file with a plain count reads back: only the count made the two above foreign.
  std::ofstream(dir.path / "status.json") << kiln::io::run_status_json(s);
  BOOST_TEST(kiln::io::read_run_status(dir.path).has_value());
}
