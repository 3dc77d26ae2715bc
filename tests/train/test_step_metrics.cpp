// Step records ([log] every_steps) and what every metrics.jsonl record carries: the window
// arithmetic of StepMetrics with an injected clock and reduction (no timing measured), the
// "wall_time" stamp, null for a non-finite number, and which TensorBoard group a field goes to.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/io/json.hpp"
#include "kiln/io/metric_tags.hpp"
#include "kiln/io/metrics_writer.hpp"
#include "kiln/train/step_metrics.hpp"

namespace fs = std::filesystem;

namespace {

using kiln::io::JsonValue;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("kiln-step-metrics-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<JsonValue> read_records(const fs::path& file) {
  std::ifstream in(file);
  std::vector<JsonValue> out;
  for (std::string line; std::getline(in, line);) out.push_back(kiln::io::parse_json(line, file.string()));
  return out;
}

const JsonValue& field(const JsonValue& record, const std::string& key) {
  for (const auto& [k, v] : record.object) {
    if (k == key) return v;
  }
  BOOST_FAIL("no field " << key);
  static JsonValue none;
  return none;
}
double number(const JsonValue& record, const std::string& key) { return std::stod(field(record, key).text); }
bool has(const JsonValue& record, const std::string& key) {
  for (const auto& [k, v] : record.object) {
    if (k == key) return true;
  }
  return false;
}

BOOST_AUTO_TEST_SUITE(step_metrics)

BOOST_AUTO_TEST_CASE(due_every_n_steps_counted_from_one) {
  kiln::train::StepMetrics every3(3, nullptr, [](const std::vector<double>& v) { return v; });
  BOOST_TEST(!every3.due(0));
  BOOST_TEST(!every3.due(2));
  BOOST_TEST(every3.due(3));
  BOOST_TEST(!every3.due(4));
  BOOST_TEST(every3.due(6));
  kiln::train::StepMetrics off(0, nullptr, [](const std::vector<double>& v) { return v; });
  BOOST_TEST(!off.due(1));
}

BOOST_AUTO_TEST_CASE(a_record_describes_the_window_since_the_previous_one) {
  const fs::path dir = fresh_dir("window");
  double now = 500;
  {
    kiln::io::MetricsWriter writer(dir / "metrics.jsonl", [] { return 1.7e9 + 0.25; });
    // The other rank's sums in every window: loss 6 over 4 samples, 2 correct.
    std::vector<std::vector<double>> reduced;
    auto reduce = [&](const std::vector<double>& v) {
      reduced.push_back(v);
      return std::vector<double>{v[0] + 6, v[1] + 2, v[2] + 4};
    };
    kiln::train::StepMetrics m(2, &writer, reduce, [&] { return now; });
    m.start_epoch();
    now += 0.5;  // two steps of 4 samples a rank, 8 over both
    m.record(1, 2, 0.01, {.loss_sum = 2, .correct = 3, .samples = 4, .global_samples = 8, .data_wait_s = 0.25,
                          .comm_wait_s = 0.125, .steps = 2},
             {{"loss_scale", 1024.0}});
    now += 1.0;  // two more steps; the counts are the epoch's so far
    m.record(1, 4, 0.005, {.loss_sum = 6, .correct = 5, .samples = 8, .global_samples = 16, .data_wait_s = 0.75,
                           .comm_wait_s = 0.125, .steps = 4},
             {});
    m.start_epoch();  // the trainer's sums restart with the epoch, and so does the window
    now += 10;        // between epochs: evaluation, checkpoint -- not counted
    m.start_epoch();
    now += 0.25;
    m.record(2, 5, 0.001, {.loss_sum = 1, .correct = 1, .samples = 2, .global_samples = 4, .steps = 1}, {});
    BOOST_REQUIRE(reduced.size() == 3u);
    BOOST_TEST(reduced[1] == (std::vector<double>{4, 2, 4}));  // this rank's window, not the epoch's
    BOOST_TEST(reduced[2] == (std::vector<double>{1, 1, 2}));
  }
  const auto records = read_records(dir / "metrics.jsonl");
  BOOST_REQUIRE(records.size() == 3u);
  const JsonValue& r = records[0];
  BOOST_TEST(r.object[0].key == "wall_time");  // first, from the writer's clock
  BOOST_TEST(number(r, "wall_time") == 1.7e9 + 0.25);
  BOOST_TEST(field(r, "split").text == "train_step");
  BOOST_TEST(number(r, "epoch") == 1);
  BOOST_TEST(number(r, "step") == 2);
  BOOST_TEST(number(r, "loss") == (2.0 + 6) / (4 + 4));
  BOOST_TEST(number(r, "accuracy") == (3.0 + 2) / (4 + 4));
  BOOST_TEST(number(r, "samples") == 8);
  BOOST_TEST(number(r, "steps") == 2);
  BOOST_TEST(number(r, "lr") == 0.01);
  BOOST_TEST(number(r, "samples_per_s") == 16.0);
  BOOST_TEST(number(r, "step_time_ms") == 250.0);
  BOOST_TEST(number(r, "data_wait_ms") == 125.0);
  BOOST_TEST(number(r, "comm_wait_ms") == 62.5);
  BOOST_TEST(number(r, "loss_scale") == 1024.0);
  const JsonValue& second = records[1];
  BOOST_TEST(number(second, "loss") == (4.0 + 6) / (4 + 4));
  BOOST_TEST(number(second, "samples") == 8);
  BOOST_TEST(number(second, "samples_per_s") == 8.0);
  BOOST_TEST(number(second, "step_time_ms") == 500.0);
  BOOST_TEST(number(second, "data_wait_ms") == 250.0);
  BOOST_TEST(number(second, "comm_wait_ms") == 0.0);
  const JsonValue& third = records[2];
  BOOST_TEST(number(third, "epoch") == 2);
  BOOST_TEST(number(third, "steps") == 1);
  BOOST_TEST(number(third, "step_time_ms") == 250.0);  // the 10 s between epochs are not in it
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_window_without_samples_has_no_loss) {
  const fs::path dir = fresh_dir("empty");
  {
    kiln::io::MetricsWriter writer(dir / "metrics.jsonl");
    kiln::train::StepMetrics m(1, &writer, [](const std::vector<double>& v) { return v; });
    m.start_epoch();
    m.record(1, 1, 0.1, {.steps = 1}, {});
  }
  const auto records = read_records(dir / "metrics.jsonl");
  BOOST_REQUIRE(records.size() == 1u);
  BOOST_TEST(!has(records[0], "loss"));
  BOOST_TEST(!has(records[0], "accuracy"));
  BOOST_TEST(number(records[0], "samples") == 0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(only_rank_0_writes_but_every_rank_reduces) {
  int calls = 0;
  kiln::train::StepMetrics m(1, nullptr, [&](const std::vector<double>& v) {
    ++calls;
    return v;
  });
  m.start_epoch();
  m.record(1, 1, 0.1, {.loss_sum = 1, .samples = 1, .steps = 1}, {});
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(metrics_records)

BOOST_AUTO_TEST_CASE(non_finite_numbers_are_null_in_json) {
  kiln::io::MetricsRecord r;
  r.add("loss", std::numeric_limits<double>::quiet_NaN())
      .add("a", std::numeric_limits<double>::infinity())
      .add("b", -std::numeric_limits<double>::infinity())
      .add("c", 1.0);
  BOOST_TEST(r.to_json() == R"({"loss": null, "a": null, "b": null, "c": 1.0})");
  // Strict JSON: Kiln's own strict reader takes it.
  BOOST_TEST((kiln::io::parse_json(r.to_json(), "record").object[0].value.kind == JsonValue::Kind::null));
}

BOOST_AUTO_TEST_CASE(a_record_with_its_own_wall_time_keeps_it) {
  const fs::path dir = fresh_dir("own-time");
  {
    kiln::io::MetricsWriter writer(dir / "metrics.jsonl", [] { return 5.0; });
    kiln::io::MetricsRecord r;
    r.add("epoch", std::int64_t{1}).add("wall_time", 7.5);
    writer.write(r);
  }
  const auto records = read_records(dir / "metrics.jsonl");
  BOOST_REQUIRE(records.size() == 1u);
  BOOST_TEST(records[0].object.size() == 2u);
  BOOST_TEST(number(records[0], "wall_time") == 7.5);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(tensorboard_groups) {
  using kiln::io::tensorboard_tag;
  // Existing tags of loss, accuracy, lr and counts are unchanged.
  BOOST_TEST(*tensorboard_tag("train", "loss") == "train/loss");
  BOOST_TEST(*tensorboard_tag("test", "accuracy") == "test/accuracy");
  BOOST_TEST(*tensorboard_tag("train", "lr") == "train/lr");
  BOOST_TEST(*tensorboard_tag("train", "loss_scale") == "train/loss_scale");
  BOOST_TEST(*tensorboard_tag("train", "data_skipped_samples") == "train/data_skipped_samples");
  BOOST_TEST(*tensorboard_tag("train_step", "loss") == "train_step/loss");
  // Performance counters have their own group.
  BOOST_TEST(*tensorboard_tag("train", "samples_per_s") == "perf/train/samples_per_s");
  BOOST_TEST(*tensorboard_tag("test", "time_s") == "perf/test/time_s");
  BOOST_TEST(*tensorboard_tag("train", "exposed_comm_ms_per_step") == "perf/train/exposed_comm_ms_per_step");
  BOOST_TEST(*tensorboard_tag("train", "device_utilisation_pct") == "perf/train/device_utilisation_pct");
  BOOST_TEST(*tensorboard_tag("train_step", "step_time_ms") == "perf/train_step/step_time_ms");
  BOOST_TEST(*tensorboard_tag("train_step", "data_wait_ms") == "perf/train_step/data_wait_ms");
  // Position and time are the event's, not scalars.
  BOOST_TEST(!tensorboard_tag("train", "epoch").has_value());
  BOOST_TEST(!tensorboard_tag("train", "step").has_value());
  BOOST_TEST(!tensorboard_tag("train", "wall_time").has_value());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
