// CRC-32C and the TensorBoard event file: the published test vector, and a file read back
// record by record with both CRCs checked and the scalar payload decoded. (The format was also
// checked once by hand against TensorBoard's own EventAccumulator, which read every tag.)
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "kiln/sdk/crc32c.hpp"
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

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
