// `kiln eval` and `kiln predict` through the real binary, on runs of the mlp over the synthetic
// source (3 classes, 8 features): a one-epoch run with a 50-sample eval split and eval batch 16,
// so the last batch is partial (50 = 3 x 16 + 2) and the eval path that trims it is exercised.
//   - eval --json reproduces the loss, accuracy and samples of the run's "test" record exactly,
//     the plain line carries the same figures, and the run directory is left byte for byte as it
//     was;
//   - predict writes one row per eval sample in order (CSV and JSON lines), probabilities of all
//     classes sum to 1, top-1 is the most probable class, and its accuracy is eval's; with
//     eval_last_batch = "drop" eval drops what the run dropped but predict still covers every
//     sample;
//   - errors are one "kiln: error: " line with exit status 1 and leave no output file.
#define KILN_TEST_MODULE test_eval_predict
#include "kiln_test_main.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "json_lite.hpp"
#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::KilnResult;
using kiln::test::slurp;
using kiln::test::json::Value;

constexpr int kEvalCount = 50;
constexpr int kClasses = 3;

using kiln::test::one_line_error;

KilnResult kiln(const std::vector<std::string>& args) { return kiln::test::run_kiln(kiln::test::scratch_dir(), args); }

/// Every file under `dir` with its contents: what "writes nothing into the run" compares.
std::map<fs::path, std::string> snapshot(const fs::path& dir) {
  std::map<fs::path, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out[e.path()] = e.is_regular_file() ? slurp(e.path()) : "";
  return out;
}

/// Trains one epoch into scratch/<name>; `extra` is appended to the config (more tables),
/// `sets` are --set overrides.
fs::path train(const std::string& name, const std::string& extra, std::vector<std::string> sets = {}) {
  const fs::path dir = kiln::test::scratch_dir() / name;
  const fs::path config = kiln::test::scratch_dir() / (name + ".toml");
  std::ofstream(config) << "[run]\nepochs = 1\n\n"
                           "[backend]\ntype = \"cpu\"\nthreads = 1\n\n"
                           "[model]\ntype = \"mlp\"\nin_features = 8\nhidden = [16]\nnum_classes = 3\n\n"
                           "[data.train]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 256\n\n"
                           "[loader]\nbatch = 16\nworkers = 1\n\n"
                           "[checkpoint]\nevery_epochs = 1\n\n"
                           "[log]\nprogress = \"never\"\n\n"
                        << extra;
  std::vector<std::string> args = {"train", "--config", config.string(), "--run-dir", dir.string()};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  const KilnResult r = kiln(args);
  BOOST_TEST_REQUIRE(r.status == 0, "kiln train failed: " << r.err);
  return dir;
}

const std::string kEvalTable = "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 3\ncount = 50\nseed = 7\n";

const fs::path& run_with_eval() {
  static const fs::path dir = train("run-eval", kEvalTable);
  return dir;
}

/// The run's "test" record for epoch 1.
Value test_record(const fs::path& dir) {
  std::istringstream in(slurp(dir / "metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    Value v = kiln::test::json::parse(line);
    if (v.at("split").string == "test") return v;
  }
  BOOST_FAIL("no test record in " << (dir / "metrics.jsonl"));
  return {};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
  return out;
}

/// One predicted row, whichever format it came from.
struct Row {
  long index = -1, label = -1;
  std::vector<long> top;
  std::vector<double> prob;
};

void check_rows(const std::vector<Row>& rows, int expected_rows, double eval_accuracy) {
  BOOST_TEST_REQUIRE(rows.size() == static_cast<std::size_t>(expected_rows));
  int correct = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    BOOST_TEST(r.index == static_cast<long>(i), "rows out of the data source's order");
    BOOST_TEST((r.label >= 0 && r.label < kClasses));
    BOOST_TEST_REQUIRE(r.top.size() == static_cast<std::size_t>(kClasses));
    double sum = 0;
    for (std::size_t k = 0; k < r.prob.size(); ++k) {
      sum += r.prob[k];
      if (k > 0) BOOST_TEST(r.prob[k] <= r.prob[k - 1], "row " << i << ": top-k not most probable first");
    }
    BOOST_TEST(std::abs(sum - 1.0) <= 1e-5, "row " << i << ": probabilities sum to " << sum);
    // All classes listed once, so top[0] is the argmax of the probabilities.
    BOOST_TEST((std::set<long>(r.top.begin(), r.top.end()).size() == static_cast<std::size_t>(kClasses)));
    if (r.top[0] == r.label) ++correct;
  }
  BOOST_TEST(static_cast<double>(correct) / static_cast<double>(rows.size()) == eval_accuracy);
}

std::vector<Row> read_csv(const fs::path& file) {
  const auto lines = lines_of(slurp(file));
  BOOST_TEST_REQUIRE(!lines.empty());
  BOOST_TEST(lines[0] == "index,label,top1,prob1,top2,prob2,top3,prob3");
  std::vector<Row> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto cells = split_csv(lines[i]);
    BOOST_TEST_REQUIRE(cells.size() == 2u + 2u * kClasses, lines[i]);
    Row r;
    r.index = std::stol(cells[0]);
    r.label = std::stol(cells[1]);
    for (int k = 0; k < kClasses; ++k) {
      r.top.push_back(std::stol(cells[2 + 2 * k]));
      r.prob.push_back(std::stod(cells[3 + 2 * k]));
    }
    rows.push_back(r);
  }
  return rows;
}

std::vector<Row> read_jsonl(const fs::path& file) {
  std::vector<Row> rows;
  for (const std::string& line : lines_of(slurp(file))) {
    const Value v = kiln::test::json::parse(line);
    Row r;
    r.index = static_cast<long>(v.at("index").number);
    r.label = static_cast<long>(v.at("label").number);
    for (const Value& t : v.at("top").items) r.top.push_back(static_cast<long>(t.number));
    for (const Value& p : v.at("prob").items) r.prob.push_back(p.number);
    BOOST_TEST(r.top.size() == r.prob.size());
    rows.push_back(r);
  }
  return rows;
}

BOOST_AUTO_TEST_CASE(eval_reproduces_the_runs_test_record_and_writes_nothing) {
  const fs::path dir = run_with_eval();
  const Value want = test_record(dir);
  const auto before = snapshot(dir);

  const KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value got = kiln::test::json::parse(r.out);
  BOOST_TEST(got.at("samples").number == static_cast<double>(kEvalCount));
  BOOST_TEST(got.at("samples").number == want.at("samples").number);
  BOOST_TEST(got.at("loss").number == want.at("loss").number);
  BOOST_TEST(got.at("accuracy").number == want.at("accuracy").number);
  BOOST_TEST(got.at("checkpoint").string == (dir / "checkpoints" / "epoch-0001").string());
  // Three classes: a top-5 accuracy would be 1 by definition, so none is reported.
  BOOST_TEST(got.find("accuracy_top5") == nullptr);
  BOOST_TEST(want.find("accuracy_top5") == nullptr);  // nor by the run

  // The plain line: the same figures, rounded as a run's epoch line rounds them.
  const KilnResult line = kiln({"eval", "--run-dir", dir.string(), "--checkpoint", (dir / "checkpoints" / "epoch-0001").string()});
  BOOST_TEST_REQUIRE(line.status == 0, line.err);
  char want_line[200];
  std::snprintf(want_line, sizeof want_line, "eval  loss %.4f  accuracy %.4f  samples %d  checkpoint %s\n",
                want.at("loss").number, want.at("accuracy").number, kEvalCount,
                (dir / "checkpoints" / "epoch-0001").string().c_str());
  BOOST_TEST(line.out == std::string(want_line));
  BOOST_TEST((snapshot(dir) == before), "kiln eval changed the run directory");
}

BOOST_AUTO_TEST_CASE(predict_csv_and_jsonl_match_eval) {
  const fs::path dir = run_with_eval();
  const double accuracy = test_record(dir).at("accuracy").number;
  const auto before = snapshot(dir);
  const fs::path csv = kiln::test::scratch_dir() / "pred.csv", jsonl = kiln::test::scratch_dir() / "pred.jsonl";
  const KilnResult a = kiln({"predict", "--run-dir", dir.string(), "--output", csv.string(), "--top-k", "3"});
  BOOST_TEST_REQUIRE(a.status == 0, a.err);
  check_rows(read_csv(csv), kEvalCount, accuracy);
  const KilnResult b = kiln({"predict", "--run-dir", dir.string(), "--output", jsonl.string(), "--top-k", "3"});
  BOOST_TEST_REQUIRE(b.status == 0, b.err);
  check_rows(read_jsonl(jsonl), kEvalCount, accuracy);
  // The same model on the same samples: the two files agree row for row.
  const auto rc = read_csv(csv), rj = read_jsonl(jsonl);
  for (std::size_t i = 0; i < rc.size(); ++i) {
    BOOST_TEST(rc[i].label == rj[i].label);
    BOOST_TEST((rc[i].top == rj[i].top));
  }
  BOOST_TEST((snapshot(dir) == before), "kiln predict changed the run directory");
}

// Under bf16 the model computes from bf16 copies of the f32 weights; the evaluation pass refreshes
// them first, so the run's test record (after its last optimizer step) and an evaluation of the
// checkpoint see the same weights and agree exactly (on any CPU: allow_emulated lets one without
// native bf16 run it).
BOOST_AUTO_TEST_CASE(eval_reproduces_a_bf16_run) {
  const fs::path dir = train("run-bf16", kEvalTable, {"precision.type=bf16", "precision.allow_emulated=true"});
  const Value want = test_record(dir);
  const KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value got = kiln::test::json::parse(r.out);
  BOOST_TEST(got.at("loss").number == want.at("loss").number);
  BOOST_TEST(got.at("accuracy").number == want.at("accuracy").number);
  BOOST_TEST(got.at("samples").number == want.at("samples").number);
}

// A run with eval_last_batch = "drop" counts only whole eval batches (48 of 50) in its test
// record; eval reproduces that record, and predict still writes every sample.
BOOST_AUTO_TEST_CASE(dropped_last_batch_eval_matches_run_predict_covers_all) {
  const fs::path dir = train("run-drop", kEvalTable, {"loader.eval_last_batch=\"drop\""});
  const Value want = test_record(dir);
  BOOST_TEST(want.at("samples").number == 48.0);
  const KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value got = kiln::test::json::parse(r.out);
  BOOST_TEST(got.at("samples").number == 48.0);
  BOOST_TEST(got.at("loss").number == want.at("loss").number);
  BOOST_TEST(got.at("accuracy").number == want.at("accuracy").number);
  const fs::path out = kiln::test::scratch_dir() / "drop.jsonl";
  const KilnResult p = kiln({"predict", "--run-dir", dir.string(), "--output", out.string(), "--top-k", "3"});
  BOOST_TEST_REQUIRE(p.status == 0, p.err);
  // All 50 rows; their accuracy is that of all 50, which eval with "partial" reports.
  const KilnResult all = kiln({"eval", "--run-dir", dir.string(), "--json", "--set", "loader.eval_last_batch=partial"});
  BOOST_TEST_REQUIRE(all.status == 0, all.err);
  check_rows(read_jsonl(out), kEvalCount, kiln::test::json::parse(all.out).at("accuracy").number);
}

// Any data source through --set: the train split as eval data gives its 256 samples.
BOOST_AUTO_TEST_CASE(eval_on_a_data_source_given_with_set) {
  const fs::path dir = run_with_eval();
  const KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json", "--set", "data.eval.count=256", "--set",
                             "data.eval.seed=0"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(kiln::test::json::parse(r.out).at("samples").number == 256.0);
}

BOOST_AUTO_TEST_CASE(weights_that_diverged_are_refused_rather_than_scored) {
  // NaN outputs had an accuracy (argmax class 0), a top-5 below it and "-nan" probabilities in
  // a JSONL file no parser reads; now both commands stop, and predict leaves no file.
  const fs::path dir = train("run-diverged", kEvalTable,
                             {"optimizer.type=sgd", "optimizer.lr=1e30", "run.stop_on_nonfinite_loss=false"});
  const std::string expected =
      "the loss over the 50 samples evaluated is NaN: the model's outputs are not finite, so no accuracy or "
      "prediction of them means anything; either the weights in " + (dir / "checkpoints" / "epoch-0001").string() +
      " diverged (evaluate an earlier checkpoint with --checkpoint) or the input overflows the model (check "
      "[data.eval]'s normalisation)";
  KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json"});
  BOOST_TEST(kiln::test::one_line_error(r) == expected);
  const fs::path out = kiln::test::scratch_dir() / "diverged.jsonl";
  r = kiln({"predict", "--run-dir", dir.string(), "--output", out.string()});
  BOOST_TEST(kiln::test::one_line_error(r) == expected);
  BOOST_TEST(!fs::exists(out));
}

BOOST_AUTO_TEST_CASE(run_without_eval_split_says_so) {
  const fs::path dir = train("run-no-eval", "");
  const std::string log = slurp(dir / "logs" / "rank0.log");
  BOOST_TEST(log.find("no eval split ([data.eval]), so no test accuracy") != std::string::npos, log);
  BOOST_TEST(log.find("final test accuracy") == std::string::npos, log);
  const std::string msg = one_line_error(kiln({"eval", "--run-dir", dir.string()}));
  BOOST_TEST(msg == (dir / "config.toml").string() +
                        " has no eval split ([data.eval]); name a data source with --set data.eval.type=... --set "
                        "data.eval.path=...");
  // ... and a source given on the command line is evaluated.
  const KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json", "--set", "data.eval.type=synthetic",
                             "--set", "data.eval.shape=[8]", "--set", "data.eval.classes=3", "--set",
                             "data.eval.count=20"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  BOOST_TEST(kiln::test::json::parse(r.out).at("samples").number == 20.0);
}

// eval --per-class counts what predict writes: the same top-1 per sample, so each class's samples,
// predictions and hits agree with the CSV, and the hits add up to the overall accuracy.
BOOST_AUTO_TEST_CASE(eval_per_class_agrees_with_predict_and_the_overall_accuracy) {
  const fs::path dir = run_with_eval();
  const KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json", "--per-class"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value got = kiln::test::json::parse(r.out);
  const fs::path csv = kiln::test::scratch_dir() / "per-class.csv";
  BOOST_TEST_REQUIRE(kiln({"predict", "--run-dir", dir.string(), "--output", csv.string(), "--top-k", "3"}).status == 0);
  std::map<long, double> samples, predicted, hits;
  for (const Row& row : read_csv(csv)) {
    ++samples[row.label];
    ++predicted[row.top[0]];
    if (row.top[0] == row.label) ++hits[row.label];
  }
  double all_hits = 0, all_samples = 0;
  for (const Value& c : got.at("per_class").items) {
    const long cls = static_cast<long>(c.at("class").number);
    BOOST_TEST(c.find("name") == nullptr);  // this run names no classes
    BOOST_TEST(c.at("samples").number == samples[cls], "class " << cls);
    BOOST_TEST(c.at("predicted").number == predicted[cls], "class " << cls);
    BOOST_TEST(std::abs(c.at("recall").number * samples[cls] - hits[cls]) < 1e-9, "class " << cls);
    all_hits += hits[cls];
    all_samples += c.at("samples").number;
  }
  BOOST_TEST(all_samples == static_cast<double>(kEvalCount));
  BOOST_TEST(all_hits / all_samples == got.at("accuracy").number);
  // The plain form: the eval line, then the table.
  const KilnResult text = kiln({"eval", "--run-dir", dir.string(), "--per-class"});
  BOOST_TEST_REQUIRE(text.status == 0, text.err);
  const auto lines = lines_of(text.out);
  BOOST_TEST_REQUIRE(lines.size() >= 3u);
  BOOST_TEST(lines[0].rfind("eval  loss ", 0) == 0u);
  BOOST_TEST(lines[1].rfind("class  name ", 0) == 0u);
  BOOST_TEST(lines.back().find("macro average") != std::string::npos);
}

// For a model of more than five classes kiln eval reports the top-5 accuracy (ImageNet's Acc@5):
// the fraction of predict's rows whose label is among its five classes, exactly, and what the
// run's last test record reported (counted by the backend during training).
BOOST_AUTO_TEST_CASE(eval_top5_accuracy_agrees_with_predict_and_the_run) {
  const std::string ten = "[data.eval]\ntype = \"synthetic\"\nshape = [8]\nclasses = 10\ncount = 50\nseed = 7\n";
  const fs::path dir = train("run-ten", ten, {"model.num_classes=10", "data.train.classes=10"});
  const KilnResult r = kiln({"eval", "--run-dir", dir.string(), "--json"});
  BOOST_TEST_REQUIRE(r.status == 0, r.err);
  const Value got = kiln::test::json::parse(r.out);
  const double top5 = got.at("accuracy_top5").number;
  BOOST_TEST(top5 >= got.at("accuracy").number);
  BOOST_TEST(got.at("accuracy").number == test_record(dir).at("accuracy").number);  // the rest as before
  BOOST_TEST(got.at("accuracy_top5").number == test_record(dir).at("accuracy_top5").number);
  const KilnResult line = kiln({"eval", "--run-dir", dir.string()});
  BOOST_TEST(line.out.find(fmt::format("  top-5 {:.4f}  samples 50", top5)) != std::string::npos, line.out);

  const fs::path out = kiln::test::scratch_dir() / "ten.jsonl";
  BOOST_TEST_REQUIRE(kiln({"predict", "--run-dir", dir.string(), "--output", out.string(), "--top-k", "5"}).status == 0);
  int rows = 0, hits = 0;
  for (const std::string& l : lines_of(slurp(out))) {
    const Value v = kiln::test::json::parse(l);
    ++rows;
    for (const Value& t : v.at("top").items) hits += t.number == v.at("label").number;
  }
  BOOST_TEST(rows == kEvalCount);
  BOOST_TEST(static_cast<double>(hits) / rows == top5);
}

/// The fields of one CSV line as RFC 4180 writes them: a quoted field may hold commas, and a
/// doubled quote inside it is one quote.
std::vector<std::string> split_quoted_csv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The names a run's training data gives its classes travel in its checkpoints; predict writes
// each class's name next to its index (one with a comma, one with quotes, to test the quoting).
BOOST_AUTO_TEST_CASE(predict_writes_the_class_names_the_checkpoint_keeps) {
  const std::vector<std::string> names = {"cat", "tench, Tinca tinca", "say \"hi\""};
  const fs::path dir = train("run-named", kEvalTable,
                             {R"(data.train.class_names=["cat", "tench, Tinca tinca", "say \"hi\""])"});
  BOOST_TEST(slurp(dir / "logs" / "rank0.log").find("classes named \"cat\" ... \"say \\\"hi\\\"\"") != std::string::npos);
  const fs::path csv = kiln::test::scratch_dir() / "named.csv", jsonl = kiln::test::scratch_dir() / "named.jsonl";
  BOOST_TEST_REQUIRE(kiln({"predict", "--run-dir", dir.string(), "--output", csv.string(), "--top-k", "3"}).status == 0);
  const auto lines = lines_of(slurp(csv));
  BOOST_TEST_REQUIRE(lines.size() == static_cast<std::size_t>(kEvalCount) + 1);
  BOOST_TEST(lines[0] == "index,label,label_name,top1,top1_name,prob1,top2,top2_name,prob2,top3,top3_name,prob3");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto cells = split_quoted_csv(lines[i]);
    BOOST_TEST_REQUIRE(cells.size() == 3u + 3u * kClasses, lines[i]);
    BOOST_TEST(cells[2] == names.at(std::stoul(cells[1])), lines[i]);
    for (int k = 0; k < kClasses; ++k) BOOST_TEST(cells[4 + 3 * k] == names.at(std::stoul(cells[3 + 3 * k])), lines[i]);
  }
  BOOST_TEST(slurp(csv).find(R"(,"tench, Tinca tinca",)") != std::string::npos);
  BOOST_TEST(slurp(csv).find(R"(,"say ""hi""",)") != std::string::npos);

  BOOST_TEST_REQUIRE(kiln({"predict", "--run-dir", dir.string(), "--output", jsonl.string(), "--top-k", "2"}).status == 0);
  for (const std::string& line : lines_of(slurp(jsonl))) {
    const Value v = kiln::test::json::parse(line);
    BOOST_TEST(v.at("label_name").string == names.at(static_cast<std::size_t>(v.at("label").number)));
    BOOST_TEST_REQUIRE(v.at("names").items.size() == 2u);
    for (std::size_t k = 0; k < 2; ++k) {
      BOOST_TEST(v.at("names").items[k].string == names.at(static_cast<std::size_t>(v.at("top").items[k].number)));
    }
  }
  // eval --per-class names them too.
  const KilnResult table = kiln({"eval", "--run-dir", dir.string(), "--per-class"});
  BOOST_TEST_REQUIRE(table.status == 0, table.err);
  BOOST_TEST(table.out.find("\n    1  tench, Tinca tinca ") != std::string::npos, table.out);
  // A run whose data names no classes writes no name columns (the other cases check its header).
}

// Data that numbers the classes otherwise than the data the weights learnt from is refused before
// anything is scored or written, by eval, predict and train alike.
BOOST_AUTO_TEST_CASE(data_that_names_its_classes_otherwise_is_refused) {
  const fs::path dir = train("run-named-2", kEvalTable, {R"(data.train.class_names=["cat", "dog", "eel"])"});
  const std::string checkpoint = (dir / "checkpoints" / "epoch-0001").string();
  BOOST_TEST(one_line_error(kiln({"eval", "--run-dir", dir.string(), "--set",
                                  R"(data.eval.class_names=["cat", "eel", "dog"])"})) ==
             "the eval data's classes differ from those the checkpoint was trained on: class 1 is \"dog\" in the "
             "checkpoint " + checkpoint + " but \"eel\" in [data.eval]; evaluate with data of the same classes in the "
             "same order");
  const fs::path out = kiln::test::scratch_dir() / "refused.csv";
  one_line_error(kiln({"predict", "--run-dir", dir.string(), "--output", out.string(), "--set",
                       R"(data.eval.class_names=["dog"])"}));
  BOOST_TEST(!fs::exists(out));
  // The same names, or fewer of them (a split without the last class): accepted.
  BOOST_TEST(kiln({"eval", "--run-dir", dir.string(), "--set", R"(data.eval.class_names=["cat", "dog"])"}).status == 0);

  // kiln train compares its two splits before the run directory exists.
  const fs::path config = kiln::test::scratch_dir() / "run-named-2.toml";
  const fs::path never = kiln::test::scratch_dir() / "run-never";
  BOOST_TEST(one_line_error(kiln({"train", "--config", config.string(), "--run-dir", never.string(), "--set",
                                  R"(data.train.class_names=["cat", "dog", "eel"])", "--set",
                                  R"(data.eval.class_names=["dog", "cat", "eel"])"})) ==
             "the eval split's classes differ from the train split's: class 0 is \"cat\" in [data.train] but \"dog\" "
             "in [data.eval]; its labels would be scored against the wrong outputs. Give both splits the same classes "
             "in the same order (an ImageFolder split needs the same class directories)");
  BOOST_TEST(!fs::exists(never));
  // A source breaking the contract (more names than classes) is named with its table.
  BOOST_TEST(one_line_error(kiln({"train", "--config", config.string(), "--run-dir", never.string(), "--set",
                                  R"(data.train.class_names=["a", "b", "c", "d"])"}))
                 .find("data source 'synthetic' ([data.train]) names 4 classes but has only 3 (num_classes)") !=
             std::string::npos);
  BOOST_TEST(!fs::exists(never));
}

BOOST_AUTO_TEST_CASE(errors_are_one_line) {
  const fs::path dir = run_with_eval();
  const fs::path missing = kiln::test::scratch_dir() / "no-such-run";
  BOOST_TEST(one_line_error(kiln({"eval", "--run-dir", missing.string()})) ==
             "--run-dir " + missing.string() + ": no such directory");

  const fs::path empty = kiln::test::scratch_dir() / "run-without-checkpoints";
  fs::create_directories(empty);
  fs::copy_file(dir / "config.toml", empty / "config.toml", fs::copy_options::overwrite_existing);
  BOOST_TEST(one_line_error(kiln({"eval", "--run-dir", empty.string()})).rfind(
                 "no complete checkpoint in " + (empty / "checkpoints").string(), 0) == 0u);
  BOOST_TEST(one_line_error(kiln({"eval", "--run-dir", dir.string(), "--checkpoint", empty.string()})) ==
             "--checkpoint " + empty.string() + ": not a complete checkpoint directory (no model.safetensors)");

  const std::string misfit = one_line_error(kiln({"eval", "--run-dir", dir.string(), "--set", "model.hidden=[5]"}));
  BOOST_TEST(misfit.find("tensor 'layers.0.weight' is f32(16, 8) but the model's is f32(5, 8)") != std::string::npos,
             misfit);

  // A failed predict leaves no file, not even its temporary.
  const fs::path out_dir = kiln::test::scratch_dir() / "failed-predict";
  fs::create_directories(out_dir);
  one_line_error(kiln({"predict", "--run-dir", dir.string(), "--output", (out_dir / "p.csv").string(), "--set",
                       "model.hidden=[5]"}));
  BOOST_TEST(fs::is_empty(out_dir), "a failed predict left a file in " << out_dir);
  BOOST_TEST(one_line_error(kiln({"predict", "--run-dir", dir.string(), "--output", (out_dir / "p.txt").string()})) ==
             "--output " + (out_dir / "p.txt").string() +
                 ": the file name must end in .csv or .jsonl (that picks the format)");
  BOOST_TEST(one_line_error(kiln({"predict", "--run-dir", dir.string(), "--output", (out_dir / "p.csv").string(),
                                  "--top-k", "4"})) == "--top-k 4 is more than the model's 3 classes");
  BOOST_TEST(fs::is_empty(out_dir));

  // Found before the pass: an --output that is a directory, an empty --checkpoint (it meant the
  // default), and a checkpoints folder whose only checkpoint lacks a file ("the run wrote none").
  fs::create_directories(out_dir / "p.csv");
  BOOST_TEST(one_line_error(kiln({"predict", "--run-dir", dir.string(), "--output", (out_dir / "p.csv").string()})) ==
             "--output " + (out_dir / "p.csv").string() + ": is a directory; name a file in it (e.g. " +
                 (out_dir / "p.csv" / "predictions.csv").string() + ")");
  fs::remove(out_dir / "p.csv");
  BOOST_TEST(one_line_error(kiln({"eval", "--run-dir", dir.string(), "--checkpoint", ""})) ==
             "--checkpoint is empty; name a checkpoint directory, or leave it out for the newest complete one");
  fs::create_directories(empty / "checkpoints" / "epoch-0001");
  fs::copy_file(dir / "checkpoints" / "epoch-0001" / "model.safetensors",
                empty / "checkpoints" / "epoch-0001" / "model.safetensors");
  BOOST_TEST(one_line_error(kiln({"eval", "--run-dir", empty.string()})) ==
             "no complete checkpoint in " + (empty / "checkpoints").string() +
                 ": epoch-0001 lacks model.safetensors or trainer.safetensors (copied in part?); pass --checkpoint DIR");

  // An eval split smaller than a batch, dropped: the keys at fault (it named last_batch and batch).
  BOOST_TEST(one_line_error(kiln({"eval", "--run-dir", dir.string(), "--set", "loader.eval_last_batch=drop", "--set",
                                  "loader.eval_batch=64"})) ==
             "loader.eval_last_batch (--set loader.eval_last_batch) = \"drop\" leaves no step: [data.eval] has 50 "
             "samples, fewer than one global batch (loader.eval_batch (--set loader.eval_batch) 64 x world size 1); "
             "use a smaller eval_batch, fewer ranks, or eval_last_batch = \"pad\" or \"partial\"");
}

}  // namespace
