// Dropping metrics.jsonl records of epochs a resumed run trains again (see the header).
#include "kiln/io/metrics_trim.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <optional>

#include "kiln/errors.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/json.hpp"

namespace kiln::io {
namespace {

/// Where a record belongs: its whole-number "epoch" and "step", where it has them.
struct Position {
  std::optional<std::uint64_t> epoch, step;
};

Position position_of(std::string_view line, const std::string& where) {
  Position p;
  try {
    const JsonValue v = parse_json(line, where);
    if (v.kind != JsonValue::Kind::object) return p;
    for (const auto& [k, field] : v.object) {
      try {
        if (k == "epoch") p.epoch = field.as_uint(where);
        if (k == "step") p.step = field.as_uint(where);
      } catch (const DataError&) {
        // Not a whole number: that field does not place the record.
      }
    }
  } catch (const DataError&) {
    // Not a record this writer made: kept as it is; it is not ours to judge.
  }
  return p;
}

bool written_after(const Position& p, std::int64_t epochs_done, std::int64_t steps_done) {
  if (p.step) return *p.step > static_cast<std::uint64_t>(steps_done);
  return p.epoch && *p.epoch > static_cast<std::uint64_t>(epochs_done);
}

}  // namespace

std::int64_t drop_metrics_after(const std::filesystem::path& path, std::int64_t epochs_done, std::int64_t steps_done) {
  if (!std::filesystem::exists(path)) return 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot read {}", path.string()));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string kept;
  std::int64_t dropped = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) {  // torn by the crash: never a whole record
      ++dropped;
      break;
    }
    const std::string_view line(text.data() + at, nl - at);
    if (written_after(position_of(line, path.string()), epochs_done, steps_done)) {
      ++dropped;
    } else {
      kept.append(line).push_back('\n');
    }
    at = nl + 1;
  }
  if (dropped > 0) write_file_atomic(path, kept);
  return dropped;
}

}  // namespace kiln::io
