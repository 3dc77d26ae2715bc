// What a run prints and what it records per step, through the real `kiln` binary on the mlp over
// the synthetic source (256 training samples in batches of 16: 16 steps an epoch; 50 eval
// samples in batches of 16: 4 eval steps). kiln's stdout is a file here, not a terminal:
//   - with [log] progress_every_s = 0 it prints a plain progress line after every training and
//     evaluation step, with no carriage return or escape sequence; progress = "always" redraws
//     in place even so;
//   - [log] every_steps = 4 writes "train_step" records at steps 4, 8, ...; every record of
//     metrics.jsonl starts with wall_time, and the step records of an epoch add up to its epoch
//     record (samples, and the loss weighted by samples);
//   - a run without an eval split never prints a test accuracy;
//   - `kiln eval` shows its progress on stderr, leaving stdout to the result;
//   - [log] histograms_every_epochs writes weight histograms into the event file;
//   - every command `kiln --help` lists answers `kiln <command> --help` with its usage, status 0,
//     as that page promises.
// No output is compared against a duration: lines are counted, never timed.
#define KILN_TEST_MODULE test_console
#include "kiln_test_main.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "json_lite.hpp"
#include "kiln/io/progress_format.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::KilnResult;
using kiln::test::slurp;
using kiln::test::json::Value;

const std::string kEvalTable = "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 50\nseed = 7\n";

/// Trains two epochs into scratch/<name> with `log` as the [log] table and `extra` appended.
KilnResult train(const std::string& name, const std::string& log, const std::string& extra) {
  const fs::path dir = kiln::test::scratch_dir() / name;
  const fs::path config = kiln::test::scratch_dir() / (name + ".toml");
  std::ofstream(config) << "[run]\nepochs = 2\n\n"
                           "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                           "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [16]\nnum_classes = 3\n\n"
                           "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 256\n\n"
                           "[loader]\nbatch = 16\nworkers = 1\n\n"
                           "[checkpoint]\nevery_epochs = 1\n\n"
                           "[log]\n"
                        << log << "\n\n"
                        << extra;
  KilnResult r = kiln::test::run_kiln(kiln::test::scratch_dir(),
                                      {"train", "--config", config.string(), "--run-dir", dir.string()});
  BOOST_TEST_REQUIRE(r.status == 0, "kiln train failed: " << r.err);
  return r;
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

/// The text before " samples/s" in `line` ("5.21k"), or "" if none.
std::string rate_text(const std::string& line) {
  const auto end = line.find(" samples/s");
  if (end == std::string::npos) return "";
  const auto start = line.rfind(' ', end - 1);
  return line.substr(start + 1, end - start - 1);
}

/// "5.21k" as 5210; NaN for text that is no number.
double si_value(const std::string& text) {
  std::size_t used = 0;
  double v = std::nan("");
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nan("");
  }
  const std::string suffix = text.substr(used);
  if (suffix.empty()) return v;
  if (suffix == "k") return v * 1e3;
  if (suffix == "M") return v * 1e6;
  if (suffix == "G") return v * 1e9;
  return std::nan("");
}

std::vector<Value> read_metrics(const fs::path& file) {
  std::vector<Value> out;
  std::istringstream in(slurp(file));
  for (std::string line; std::getline(in, line);) out.push_back(kiln::test::json::parse(line));
  return out;
}

BOOST_AUTO_TEST_CASE(off_a_terminal_progress_comes_as_plain_lines) {
  const KilnResult r = train("plain", "progress = \"auto\"\nprogress_every_s = 0", kEvalTable);
  const auto train_lines = lines_starting(r.out, "epoch 1/2 step ");
  BOOST_TEST(train_lines.size() == 16u, r.out);
  BOOST_TEST(train_lines.back().rfind("epoch 1/2 step 16/16 (100%) elapsed ", 0) == 0u, train_lines.back());
  BOOST_TEST(train_lines.back().find(" eta 00:00 | ") != std::string::npos, train_lines.back());
  BOOST_TEST(train_lines.back().find(" samples/s | loss ") != std::string::npos, train_lines.back());
  BOOST_TEST(train_lines.back().find(" | lr 0.001") != std::string::npos, train_lines.back());
  BOOST_TEST(lines_starting(r.out, "epoch 2/2 step ").size() == 16u, r.out);
  const auto eval_lines = lines_starting(r.out, "eval  1/2 step ");
  BOOST_TEST(eval_lines.size() == 4u, r.out);
  BOOST_TEST(eval_lines.back().rfind("eval  1/2 step 4/4 (100%)", 0) == 0u, eval_lines.back());
  // The epoch summaries are still there, one each.
  const auto summaries = lines_starting(r.out, "epoch   1/2  train loss ");
  BOOST_TEST(summaries.size() == 1u, r.out);
  BOOST_TEST(lines_starting(r.out, "epoch   2/2  train loss ").size() == 1u, r.out);
  // Both write samples/s with the progress display's formatter (three significant digits, SI suffix).
  for (const std::string& line : {train_lines.back(), eval_lines.back(), summaries.empty() ? std::string() : summaries[0]}) {
    const std::string rate = rate_text(line);
    BOOST_TEST(rate == kiln::io::format_si(si_value(rate)), "'" << rate << "' in: " << line);
  }
  BOOST_TEST(r.out.find('\r') == std::string::npos);
  BOOST_TEST(r.out.find('\033') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(always_redraws_in_place_and_never_shows_only_epoch_lines) {
  const KilnResult always = train("always", "progress = \"always\"", "");
  BOOST_TEST(always.out.find("\r\033[2Kepoch 1/2 [") != std::string::npos, always.out);
  const KilnResult never = train("never", "progress = \"never\"\nprogress_every_s = 0", kEvalTable);
  BOOST_TEST(lines_starting(never.out, "epoch 1/2 step ").empty(), never.out);
  BOOST_TEST(lines_starting(never.out, "eval  ").empty(), never.out);
  BOOST_TEST(lines_starting(never.out, "epoch   2/2  train loss ").size() == 1u, never.out);
}

BOOST_AUTO_TEST_CASE(step_records_every_n_steps_add_up_to_the_epoch) {
  train("steps", "progress = \"never\"\nevery_steps = 4", kEvalTable);
  const auto records = read_metrics(kiln::test::scratch_dir() / "steps" / "metrics.jsonl");
  double last_time = 0;
  std::vector<std::int64_t> steps;
  double window_samples = 0, window_loss = 0;
  int epoch_records = 0;
  for (const Value& r : records) {
    BOOST_TEST(r.members.front().first == "wall_time");
    const double t = r.at("wall_time").number;
    BOOST_TEST(t > 1.6e9);  // Unix seconds, not a duration
    BOOST_TEST(t >= last_time);
    last_time = t;
    const std::string split = r.at("split").string;
    if (split == "train_step") {
      steps.push_back(static_cast<std::int64_t>(r.at("step").number));
      BOOST_TEST(r.at("steps").number == 4.0);
      BOOST_TEST(r.at("samples").number == 64.0);
      for (const char* key : {"loss", "accuracy", "lr", "samples_per_s", "step_time_ms", "data_wait_ms", "comm_wait_ms"}) {
        BOOST_TEST(r.find(key) != nullptr, key);
      }
      window_samples += r.at("samples").number;
      window_loss += r.at("loss").number * r.at("samples").number;
    } else if (split == "train") {
      ++epoch_records;
      BOOST_TEST(window_samples == r.at("samples").number);
      BOOST_TEST(std::abs(window_loss / window_samples - r.at("loss").number) < 1e-9 * (1 + r.at("loss").number));
      window_samples = window_loss = 0;
    }
  }
  BOOST_TEST(epoch_records == 2);
  BOOST_TEST(steps == (std::vector<std::int64_t>{4, 8, 12, 16, 20, 24, 28, 32}), "steps of the train_step records");
}

BOOST_AUTO_TEST_CASE(a_run_without_eval_data_prints_no_test_accuracy) {
  const KilnResult r = train("no-eval", "progress = \"auto\"\nprogress_every_s = 0", "");
  const std::string all = r.out + r.err;
  BOOST_TEST(all.find("final test accuracy") == std::string::npos, all);
  BOOST_TEST(all.find("test loss") == std::string::npos, all);
  BOOST_TEST(all.find("acc 0.0000") == std::string::npos, all);
  BOOST_TEST(lines_starting(r.out, "eval ").empty(), r.out);
  BOOST_TEST(all.find("no eval split") != std::string::npos, all);
}

BOOST_AUTO_TEST_CASE(kiln_eval_shows_its_progress_on_stderr) {
  train("eval-progress", "progress = \"never\"", kEvalTable);
  const KilnResult r = kiln::test::run_kiln(
      kiln::test::scratch_dir(), {"eval", "--run-dir", (kiln::test::scratch_dir() / "eval-progress").string(), "--json",
                                  "--set", "log.progress=auto", "--set", "log.progress_every_s=0"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(kiln::test::json::parse(r.out).at("samples").number == 50.0);  // stdout: the result alone
  const auto lines = lines_starting(r.err, "eval step ");
  BOOST_TEST(lines.size() == 4u, r.err);  // 50 samples in batches of 16
  BOOST_TEST(lines.back().rfind("eval step 4/4 (100%)", 0) == 0u, lines.back());
}

}  // namespace

// [log] histograms_every_epochs = 1: after each of the 2 epochs one histogram event per parameter
// (tag weights/<name>) in the run's event file; without it, none. (The events' fields are checked
// in test_tensorboard, and were read back once with TensorBoard's own EventAccumulator.)
BOOST_AUTO_TEST_CASE(weight_histograms_every_epoch_when_asked) {
  const auto events = [](const std::string& name) {
    std::string bytes;
    for (const auto& e : fs::directory_iterator(kiln::test::scratch_dir() / name / "tb")) bytes += slurp(e.path());
    return bytes;
  };
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  (void)train("histograms", "progress = \"never\"\nhistograms_every_epochs = 1", "");
  const std::string with = events("histograms");
  for (const char* tag : {"weights/layers.0.weight", "weights/layers.0.bias", "weights/head.weight", "weights/head.bias"}) {
    BOOST_TEST(count(with, tag) == 2u, tag);
  }
  (void)train("no-histograms", "progress = \"never\"", "");
  BOOST_TEST(count(events("no-histograms"), "weights/") == 0u);
}

BOOST_AUTO_TEST_CASE(every_listed_command_answers_help) {
  const fs::path cwd = kiln::test::fresh_workdir("help");
  const KilnResult top = kiln::test::run_kiln(cwd, {"--help"});
  BOOST_TEST_REQUIRE(top.status == 0, top.err);
  // The command names: the first word of each indented line of the "commands:" list.
  std::vector<std::string> commands;
  std::istringstream lines(top.out.substr(top.out.find("commands:")));
  for (std::string line; std::getline(lines, line);) {
    if (line.size() < 3 || line.rfind("  ", 0) != 0 || line[2] == ' ' || line[2] == '-') continue;
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    if (commands.empty() || commands.back() != name) commands.push_back(name);
  }
  BOOST_TEST(commands.size() >= 9u, top.out);  // train, eval, predict, bench-comm, bench-data, collectives, doctor, plugins, config
  for (const std::string& command : commands) {
    const KilnResult r = kiln::test::run_kiln(cwd, {command, "--help"});
    BOOST_TEST(r.status == 0, command << ": " << r.err);
    BOOST_TEST(r.out.find("usage: kiln " + command) != std::string::npos, command << ":\n" << r.out << r.err);
  }
}
