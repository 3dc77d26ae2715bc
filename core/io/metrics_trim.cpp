// Dropping metrics.jsonl records of epochs a resumed run trains again (see the header).
#include "kiln/io/metrics_trim.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <optional>

#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"
#include "kiln/io/run_dir.hpp"

namespace kiln::io {
namespace {

/// The record's "epoch", if the line is a JSON object with a whole-number one.
std::optional<std::uint64_t> epoch_of(std::string_view line, const std::string& where) {
  try {
    const JsonValue v = parse_json(line, where);
    if (v.kind != JsonValue::Kind::object) return std::nullopt;
    for (const auto& [k, field] : v.object) {
      if (k == "epoch") return field.as_uint(where);
    }
  } catch (const DataError&) {
    // Not a record this writer made: kept as it is; it is not ours to judge.
  }
  return std::nullopt;
}

}  // namespace

std::int64_t drop_metrics_after_epoch(const std::filesystem::path& path, std::int64_t epochs_done) {
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
    const auto epoch = epoch_of(line, path.string());
    if (epoch && *epoch > static_cast<std::uint64_t>(epochs_done)) {
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
