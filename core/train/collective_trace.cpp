// The debug record's JSON (see collective_trace.hpp): written by hand (io::TextOut, put_json_quoted), read with
// the core's strict JSON reader. Every field is required, so a file cut short or edited into
// another shape is refused with the field it lacks instead of being half read.
#include "kiln/train/collective_trace.hpp"

#include <fmt/format.h>

#include <charconv>

#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"

namespace kiln::train {
namespace {

using io::JsonValue;

constexpr std::int64_t kMaxWorld = 1 << 20;
constexpr std::int64_t kMaxMs = 1'000'000'000'000'000;  // wall-clock milliseconds: the year 33658
constexpr std::int64_t kMaxCount = std::int64_t{1} << 62;

/// Reads members of one JSON object by name, each exactly once.
class Fields {
 public:
  Fields(const JsonValue& v, std::string what) : v_(v), what_(std::move(what)) {
    if (v.kind != JsonValue::Kind::object) throw DataError(what_ + ": expected a JSON object");
  }
  const JsonValue& get(std::string_view key, JsonValue::Kind kind) const {
    for (const auto& m : v_.object) {
      if (m.key != key) continue;
      if (m.value.kind != kind) throw DataError(fmt::format("{}: field '{}' has the wrong type", what_, key));
      return m.value;
    }
    throw DataError(fmt::format("{}: field '{}' is missing", what_, key));
  }
  std::string text(std::string_view key) const { return get(key, JsonValue::Kind::string).text; }
  std::int64_t integer(std::string_view key) const {
    const std::string& t = get(key, JsonValue::Kind::number).text;
    std::int64_t out = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), out);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) {
      throw DataError(fmt::format("{}: field '{}' must be an integer, found '{}'", what_, key, t));
    }
    return out;
  }
  /// An integer in [lo, hi]: the analysis subtracts times and counts ranks, so a damaged value
  /// must not overflow it or make it list a billion ranks.
  std::int64_t bounded(std::string_view key, std::int64_t lo, std::int64_t hi) const {
    const std::int64_t v = integer(key);
    if (v < lo || v > hi) {
      throw DataError(fmt::format("{}: field '{}' = {} is outside [{}, {}]", what_, key, v, lo, hi));
    }
    return v;
  }
  const std::string& what() const { return what_; }

 private:
  const JsonValue& v_;
  std::string what_;
};

}  // namespace

std::string CollectiveEntry::signature() const {
  return dtype.empty() ? op : fmt::format("{} {} x {}", op, dtype, count);
}

const CollectiveEntry* RankTrace::find(std::int64_t seq) const {
  for (const CollectiveEntry& e : entries) {
    if (e.seq == seq) return &e;
  }
  return nullptr;
}

void write_trace_head(io::TextOut& out, const TraceHeadView& t) {
  out << "{\n  \"format\": \"kiln-collectives-1\",\n  \"rank\": " << t.rank << ", \"world\": " << t.world
      << ", \"host\": ";
  io::put_json_quoted(out, t.host);
  out << ", \"pid\": " << t.pid << ",\n  \"communicator\": ";
  io::put_json_quoted(out, t.communicator);
  out << ",\n  \"reason\": ";
  io::put_json_quoted(out, t.reason);
  out << ",\n  \"phase\": ";
  io::put_json_quoted(out, t.phase);
  out << ", \"epoch\": " << t.epoch << ", \"epochs\": " << t.epochs << ", \"step\": " << t.step
      << ", \"steps\": " << t.steps << ",\n  \"started_ms\": " << t.started_ms << ", \"written_ms\": " << t.written_ms
      << ", \"issued\": " << t.issued << ",\n  \"entries\": [";
}

void write_trace_entry(io::TextOut& out, const EntryView& e, bool first) {
  out << (first ? "\n    " : ",\n    ") << "{\"seq\": " << e.seq << ", \"op\": ";
  io::put_json_quoted(out, e.op);
  out << ", \"dtype\": ";
  io::put_json_quoted(out, e.dtype);
  out << ", \"count\": " << e.count << ", \"purpose\": ";
  io::put_json_quoted(out, e.purpose);
  out << ", \"phase\": ";
  io::put_json_quoted(out, e.phase);
  out << ", \"epoch\": " << e.epoch << ", \"step\": " << e.step << ", \"issued_ms\": " << e.issued_ms
      << ", \"wait_ms\": " << e.wait_ms << ", \"end_ms\": " << e.end_ms << ", \"error\": ";
  io::put_json_quoted(out, e.error);
  out << "}";
}

void write_trace_end(io::TextOut& out) { out << "\n  ]\n}\n"; }

std::string to_json(const RankTrace& t) {
  std::string text;
  io::StringOut out(text);
  write_trace_head(out, TraceHeadView{t.rank, t.world, t.host, t.pid, t.communicator, t.reason, t.phase, t.epoch,
                                      t.epochs, t.step, t.steps, t.started_ms, t.written_ms, t.issued});
  for (std::size_t i = 0; i < t.entries.size(); ++i) {
    const CollectiveEntry& e = t.entries[i];
    write_trace_entry(out,
                      EntryView{e.seq, e.op, e.dtype, e.count, e.purpose, e.phase, e.epoch, e.step, e.issued_ms,
                                e.wait_ms, e.end_ms, e.error},
                      i == 0);
  }
  write_trace_end(out);
  return text;
}

RankTrace parse_rank_trace(std::string_view json, const std::string& what) {
  const JsonValue doc = io::parse_json(json, what);
  const Fields f(doc, what);
  if (f.text("format") != "kiln-collectives-1") {
    throw DataError(fmt::format("{}: format '{}' is not kiln-collectives-1 (written by another Kiln version?)", what,
                                f.text("format")));
  }
  RankTrace t;
  t.rank = static_cast<int>(f.bounded("rank", 0, kMaxWorld - 1));
  t.world = static_cast<int>(f.bounded("world", 1, kMaxWorld));
  if (t.rank >= t.world) throw DataError(fmt::format("{}: rank {} is not below world {}", what, t.rank, t.world));
  t.host = f.text("host");
  t.pid = f.bounded("pid", 0, kMaxCount);
  t.communicator = f.text("communicator");
  t.reason = f.text("reason");
  t.phase = f.text("phase");
  t.epoch = f.bounded("epoch", 0, kMaxCount);
  t.epochs = f.bounded("epochs", 0, kMaxCount);
  t.step = f.bounded("step", 0, kMaxCount);
  t.steps = f.bounded("steps", 0, kMaxCount);
  t.started_ms = f.bounded("started_ms", 0, kMaxMs);
  t.written_ms = f.bounded("written_ms", 0, kMaxMs);
  t.issued = f.bounded("issued", 0, kMaxCount);
  const JsonValue& entries = f.get("entries", JsonValue::Kind::array);
  std::int64_t previous = 0;
  for (std::size_t i = 0; i < entries.array.size(); ++i) {
    const Fields e(entries.array[i], fmt::format("{}: entries[{}]", what, i));
    CollectiveEntry c;
    c.seq = e.bounded("seq", 1, kMaxCount);
    // The analysis walks sequence numbers; entries out of order would be misread, not refused.
    if (c.seq <= previous || c.seq > t.issued) {
      throw DataError(fmt::format("{}: seq {} is out of order or above issued ({})", e.what(), c.seq, t.issued));
    }
    previous = c.seq;
    c.op = e.text("op");
    c.dtype = e.text("dtype");
    c.count = e.bounded("count", 0, kMaxCount);
    c.purpose = e.text("purpose");
    c.phase = e.text("phase");
    c.epoch = e.bounded("epoch", 0, kMaxCount);
    c.step = e.bounded("step", 0, kMaxCount);
    c.issued_ms = e.bounded("issued_ms", 0, kMaxMs);
    c.wait_ms = e.bounded("wait_ms", -1, kMaxMs);
    c.end_ms = e.bounded("end_ms", -1, kMaxMs);
    c.error = e.text("error");
    t.entries.push_back(std::move(c));
  }
  return t;
}

}  // namespace kiln::train
