// CRC-32C and the TensorBoard event file: the published test vector, and a file read back
// record by record with both CRCs checked and the scalar payload decoded. (The format was also
// checked once by hand against TensorBoard's own EventAccumulator, which read every tag.)
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/sdk/crc32c.hpp"
#include "kiln/io/histogram.hpp"
#include "kiln/io/metrics_writer.hpp"
#include "kiln/io/tensorboard_writer.hpp"

namespace fs = std::filesystem;

namespace {

std::uint64_t le(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

/// Splits an event file into record payloads, checking both CRCs of every record.
std::vector<std::string> read_records(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    BOOST_REQUIRE(at + 12 <= bytes.size());
    const std::uint64_t len = le(bytes, at, 8);
    BOOST_TEST(le(bytes, at + 8, 4) == kiln::io::masked_crc32c(bytes.data() + at, 8));
    BOOST_REQUIRE(at + 12 + len + 4 <= bytes.size());
    const std::string payload = bytes.substr(at + 12, len);
    BOOST_TEST(le(bytes, at + 12 + len, 4) == kiln::io::masked_crc32c(payload.data(), payload.size()));
    out.push_back(payload);
    at += 12 + len + 4;
  }
  return out;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("kiln-tb-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

BOOST_AUTO_TEST_SUITE(tensorboard)

BOOST_AUTO_TEST_CASE(crc32c_matches_the_published_vectors) {
  BOOST_TEST(kiln::io::crc32c("123456789", 9) == 0xE3069283u);
  BOOST_TEST(kiln::io::crc32c("", 0) == 0x00000000u);
  const std::string zeros(32, '\0');
  BOOST_TEST(kiln::io::crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);  // RFC 3720 B.4
}

BOOST_AUTO_TEST_CASE(event_file_has_version_then_scalars_with_valid_framing) {
  const fs::path dir = fresh_dir("events");
  fs::path file;
  {
    kiln::io::TensorBoardWriter tb(dir / "tb");
    file = tb.path();
    tb.add_scalars({{"train/loss", 0.5}, {"test/accuracy", 0.875}}, 937);
  }
  BOOST_TEST(file.filename().string().rfind("events.out.tfevents.", 0) == 0u);
  const auto records = read_records(file);
  BOOST_REQUIRE(records.size() == 3u);
  BOOST_TEST(records[0].find("brain.Event:2") != std::string::npos);
  // Event.step = 937 as field 2 varint: key 0x10, then 937 = 0xA9 0x07.
  BOOST_TEST(records[1].find(std::string("\x10\xA9\x07", 3)) != std::string::npos);
  BOOST_TEST(records[1].find("train/loss") != std::string::npos);
  // simple_value (field 2, fixed32: key 0x15) holds 0.875f.
  float v = 0.875f;
  std::string encoded("\x15", 1);
  encoded.append(reinterpret_cast<const char*>(&v), 4);
  BOOST_TEST(records[2].find(encoded) != std::string::npos);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(metrics_writer_mirrors_numeric_fields_to_tensorboard) {
  const fs::path dir = fresh_dir("mirror");
  {
    kiln::io::MetricsWriter w(dir / "metrics.jsonl");
    kiln::io::MetricsRecord r;
    r.add("epoch", std::int64_t{1}).add("step", std::int64_t{10}).add("split", std::string("test"));
    r.add("accuracy", 0.5).add("samples", std::int64_t{100});
    w.write(r);
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "tb")) files.push_back(e.path());
  BOOST_REQUIRE(files.size() == 1u);
  const auto records = read_records(files[0]);
  BOOST_REQUIRE(records.size() == 3u);  // version + accuracy + samples (epoch/step are not scalars)
  BOOST_TEST(records[1].find("test/accuracy") != std::string::npos);
  BOOST_TEST(records[2].find("test/samples") != std::string::npos);
  fs::remove_all(dir);
}

// A diverged loss: null in metrics.jsonl (no NaN in JSON), the IEEE value itself in TensorBoard,
// which draws it as a triangle. Performance counters go to the perf/ group; every event carries
// the record's wall_time.
BOOST_AUTO_TEST_CASE(non_finite_values_perf_group_and_wall_time) {
  const fs::path dir = fresh_dir("nonfinite");
  {
    kiln::io::MetricsWriter w(dir / "metrics.jsonl", [] { return 1234.5; });
    kiln::io::MetricsRecord r;
    r.add("epoch", std::int64_t{1}).add("step", std::int64_t{3}).add("split", std::string("train_step"));
    r.add("loss", std::nan("")).add("accuracy", std::numeric_limits<double>::infinity()).add("samples_per_s", 10.0);
    w.write(r);
  }
  std::ifstream in(dir / "metrics.jsonl");
  std::string line;
  std::getline(in, line);
  BOOST_TEST(line == R"({"wall_time": 1234.5, "epoch": 1, "step": 3, "split": "train_step", "loss": null, )"
                     R"("accuracy": null, "samples_per_s": 10.0})");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "tb")) files.push_back(e.path());
  BOOST_REQUIRE(files.size() == 1u);
  const auto records = read_records(files[0]);
  BOOST_REQUIRE(records.size() == 4u);
  auto simple_value = [](const std::string& event) {
    // simple_value (key 0x15, then 4 bytes) is the last field of the innermost message, so the
    // event's last five bytes.
    BOOST_REQUIRE(event.size() > 5u);
    BOOST_TEST(event[event.size() - 5] == '\x15');
    float v = 0;
    std::memcpy(&v, event.data() + event.size() - 4, 4);
    return v;
  };
  BOOST_TEST(records[1].find("train_step/loss") != std::string::npos);
  BOOST_TEST(std::isnan(simple_value(records[1])));
  BOOST_TEST(records[2].find("train_step/accuracy") != std::string::npos);
  BOOST_TEST(std::isinf(simple_value(records[2])));
  BOOST_TEST(records[3].find("perf/train_step/samples_per_s") != std::string::npos);
  BOOST_TEST(simple_value(records[3]) == 10.0f);
  // Event.wall_time (field 1, fixed64: key 0x09) is the record's.
  const double wall = 1234.5;
  std::string encoded("\x09", 1);
  encoded.append(reinterpret_cast<const char*>(&wall), 8);
  for (std::size_t i = 1; i < records.size(); ++i) BOOST_TEST(records[i].rfind(encoded, 0) == 0u);
  fs::remove_all(dir);
}

/// The fields of one protobuf message: number -> the bytes of each occurrence (a varint's
/// value as 8 little-endian bytes, fixed ones as they are, length-delimited ones' contents).
std::multimap<int, std::string> fields_of(const std::string& message) {
  std::multimap<int, std::string> out;
  std::size_t at = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      BOOST_REQUIRE(at < message.size());
      const auto b = static_cast<unsigned char>(message[at++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (at < message.size()) {
    const std::uint64_t key = varint();
    const int field = static_cast<int>(key >> 3);
    switch (key & 7) {
      case 0: { const std::uint64_t v = varint(); out.emplace(field, std::string(reinterpret_cast<const char*>(&v), 8)); break; }
      case 1: out.emplace(field, message.substr(at, 8)); at += 8; break;
      case 5: out.emplace(field, message.substr(at, 4)); at += 4; break;
      case 2: { const std::uint64_t n = varint(); out.emplace(field, message.substr(at, n)); at += n; break; }
      default: BOOST_FAIL("wire type " << (key & 7));
    }
  }
  return out;
}

std::vector<double> doubles_of(const std::string& bytes) {
  std::vector<double> out(bytes.size() / 8);
  std::memcpy(out.data(), bytes.data(), out.size() * 8);
  return out;
}

double double_of(const std::string& bytes) { return doubles_of(bytes).at(0); }

// [log] histograms_every_epochs: tensorflow.HistogramProto inside Summary.Value.histo (field 5),
// field by field as summary.proto numbers them, and the bucket counts summing to the count.
BOOST_AUTO_TEST_CASE(histogram_events_carry_tensorflows_histogram_proto) {
  const fs::path dir = fresh_dir("histo");
  fs::path file;
  const std::vector<float> values = {-1.0f, -0.5f, 0.0f, 0.25f, 0.5f, 1.0f, 1.0f, std::nanf("")};
  {
    kiln::io::TensorBoardWriter tb(dir / "tb");
    file = tb.path();
    tb.add_histograms({{"weights/fc.weight", kiln::io::histogram_of(values, 4)}}, 42, 99.5);
  }
  const auto records = read_records(file);
  BOOST_REQUIRE(records.size() == 2u);
  const auto event = fields_of(records[1]);
  BOOST_TEST(double_of(event.find(1)->second) == 99.5);  // wall_time
  std::int64_t step = 0;
  std::memcpy(&step, event.find(2)->second.data(), 8);
  BOOST_TEST(step == 42);
  const auto value = fields_of(fields_of(event.find(5)->second).find(1)->second);  // Summary.value[0]
  BOOST_TEST(value.find(1)->second == "weights/fc.weight");
  BOOST_REQUIRE(value.count(5) == 1u);  // histo
  const auto h = fields_of(value.find(5)->second);
  BOOST_TEST(double_of(h.find(1)->second) == -1.0);   // min
  BOOST_TEST(double_of(h.find(2)->second) == 1.0);    // max
  BOOST_TEST(double_of(h.find(3)->second) == 7.0);    // num: the NaN left out
  BOOST_TEST(double_of(h.find(4)->second) == 1.25);   // sum
  BOOST_TEST(double_of(h.find(5)->second) == 3.5625); // sum of squares
  // Four buckets of width 0.5 from -1: (-1, -0.5] holds -1 (the smallest goes to the first) and
  // -0.5; (-0.5, 0] holds 0; (0, 0.5] 0.25 and 0.5; (0.5, 1] the two ones.
  BOOST_TEST(doubles_of(h.find(6)->second) == std::vector<double>({-0.5, 0.0, 0.5, 1.0}), boost::test_tools::per_element());
  BOOST_TEST(doubles_of(h.find(7)->second) == std::vector<double>({2, 1, 2, 2}), boost::test_tools::per_element());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(histograms_of_one_value_of_none_and_of_edges) {
  const auto same = kiln::io::histogram_of(std::vector<float>{3.0f, 3.0f, 3.0f});
  BOOST_TEST(same.bucket_limit == std::vector<double>({3.0}), boost::test_tools::per_element());
  BOOST_TEST(same.bucket == std::vector<double>({3.0}), boost::test_tools::per_element());
  const auto none = kiln::io::histogram_of(std::vector<float>{std::nanf(""), INFINITY});
  BOOST_TEST(none.num == 0.0);
  BOOST_TEST(none.non_finite == 2);
  BOOST_TEST(none.bucket.empty());
  // Each count agrees with the edges TensorBoard is given (a value in (left, right]), whatever
  // the division rounds to: values on every edge of 30 buckets over [0, 3], and a value the
  // plain formula ceil((v - min) / width) - 1 puts one bucket off (found by a search): one too
  // far (just below the edge of bucket 14 once rounded to float), one too near (just above the
  // edge of bucket 26).
  std::vector<float> edges;
  for (int i = 0; i <= 30; ++i) edges.push_back(static_cast<float>(i) * 0.1f);
  const std::vector<float> too_far = {-0.7834005951881409f, 0.42269444465637207f, -0.1803530752658844f};
  const std::vector<float> too_near = {-0.8917645215988159f, 0.2125740945339203f, 0.10214023292064667f};
  for (const auto& values : {edges, too_far, too_near}) {
    const auto h = kiln::io::histogram_of(values, 30);
    BOOST_REQUIRE(h.bucket.size() == 30u);
    double total = 0;
    for (std::size_t b = 0; b < 30; ++b) {
      const double left = b == 0 ? -INFINITY : h.bucket_limit[b - 1];
      double inside = 0;
      for (const float v : values) inside += (v > left && v <= h.bucket_limit[b]) ? 1 : 0;
      BOOST_TEST(h.bucket[b] == inside, "bucket " << b);
      total += h.bucket[b];
    }
    BOOST_TEST(total == static_cast<double>(values.size()));
    BOOST_TEST(h.bucket_limit.back() == static_cast<double>(*std::max_element(values.begin(), values.end())));
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
