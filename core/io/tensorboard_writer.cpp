// TensorBoard event writer (see the header for the format).
#include "kiln/io/tensorboard_writer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "kiln/errors.hpp"
#include "kiln/sdk/crc32c.hpp"

namespace kiln::io {
namespace {

// ---- minimal protobuf encoding ----
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) { put_varint(out, (static_cast<std::uint64_t>(field) << 3) | wire_type); }
void put_double(std::string& out, int field, double v) {  // wire type 1: 64-bit
  put_key(out, field, 1);
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}
void put_float(std::string& out, int field, float v) {  // wire type 5: 32-bit
  put_key(out, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}
void put_int64(std::string& out, int field, std::int64_t v) {  // wire type 0: varint
  put_key(out, field, 0);
  put_varint(out, static_cast<std::uint64_t>(v));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {  // wire type 2
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// tensorflow.Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
// summary = 5 (Summary). Summary: value = 1 (repeated Value). Value: tag = 1, simple_value = 2.
std::string version_event() {
  std::string e;
  put_double(e, 1, now_seconds());
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

/// An Event at `step` whose Summary holds the one encoded Summary.Value `value`.
std::string summary_event(const std::string& value, std::int64_t step, double wall_time) {
  std::string summary;
  put_bytes(summary, 1, value);
  std::string e;
  put_double(e, 1, wall_time);
  put_int64(e, 2, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string scalar_event(const std::string& tag, double value, std::int64_t step, double wall_time) {
  std::string v;
  put_bytes(v, 1, tag);
  put_float(v, 2, static_cast<float>(value));
  return summary_event(v, step, wall_time);
}

// tensorflow.HistogramProto: min = 1, max = 2, num = 3, sum = 4, sum_squares = 5 (doubles),
// bucket_limit = 6, bucket = 7 (repeated doubles, packed as proto3 packs them); it is
// Summary.Value's histo = 5.
void put_packed_doubles(std::string& out, int field, const std::vector<double>& values) {
  std::string packed;
  for (const double v : values) {
    char b[8];
    std::memcpy(b, &v, 8);
    packed.append(b, 8);
  }
  put_bytes(out, field, packed);
}

std::string histogram_event(const std::string& tag, const Histogram& h, std::int64_t step, double wall_time) {
  std::string histo;
  put_double(histo, 1, h.min);
  put_double(histo, 2, h.max);
  put_double(histo, 3, h.num);
  put_double(histo, 4, h.sum);
  put_double(histo, 5, h.sum_squares);
  put_packed_doubles(histo, 6, h.bucket_limit);
  put_packed_doubles(histo, 7, h.bucket);
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 5, histo);
  return summary_event(v, step, wall_time);
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("cannot create TensorBoard directory {}: {}", dir.string(), ec.message()));
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  const auto secs = static_cast<long long>(now_seconds());
  path_ = dir / fmt::format("events.out.tfevents.{:010d}.{}.{}", secs, host, ::getpid());
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw IoError(fmt::format("cannot create {}: {}", path_.string(), std::strerror(errno)));
  write_record(version_event());
  std::fflush(file_);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& payload) {
  std::string rec;
  std::string len;
  put_le(len, payload.size(), 8);
  rec += len;
  put_le(rec, masked_crc32c(len.data(), len.size()), 4);
  rec += payload;
  put_le(rec, masked_crc32c(payload.data(), payload.size()), 4);
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size()) {
    throw IoError(fmt::format("cannot write {}: {}", path_.string(), std::strerror(errno)));
  }
}

void TensorBoardWriter::add_scalars(const std::vector<std::pair<std::string, double>>& scalars, std::int64_t step) {
  add_scalars(scalars, step, now_seconds());
}

void TensorBoardWriter::add_scalars(const std::vector<std::pair<std::string, double>>& scalars, std::int64_t step,
                                    double wall_time) {
  for (const auto& [tag, value] : scalars) write_record(scalar_event(tag, value, step, wall_time));
  if (std::fflush(file_) != 0) throw IoError(fmt::format("cannot flush {}: {}", path_.string(), std::strerror(errno)));
}

void TensorBoardWriter::add_histograms(const std::vector<std::pair<std::string, Histogram>>& histograms,
                                       std::int64_t step, double wall_time) {
  for (const auto& [tag, h] : histograms) write_record(histogram_event(tag, h, step, wall_time));
  if (std::fflush(file_) != 0) throw IoError(fmt::format("cannot flush {}: {}", path_.string(), std::strerror(errno)));
}

}  // namespace kiln::io
