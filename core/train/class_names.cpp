// Class names: the contract check, comparison, summary and checkpoint form (see the header).
#include "kiln/train/class_names.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"
#include "kiln/sdk/crc32c.hpp"
#include "kiln/sdk/utf8.hpp"
#include "kiln/train/checkpoint.hpp"

namespace kiln::train {
namespace {

/// Why `name` is not a usable class name, or nullptr. Control characters would break the CSV and
/// log lines the names end up in; bytes that are not UTF-8 (a Latin-1 folder name) cannot be kept
/// in the checkpoint's JSON as they are, so the run's own checkpoints would not match its data.
const char* name_fault(std::string_view name) {
  if (name.empty()) return "is empty";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "holds a control character";
  }
  if (!sdk::is_utf8(name)) return "is not UTF-8 (rename it, e.g. with convmv -f latin1 -t utf8)";
  return nullptr;
}

}  // namespace

void check_class_names(const DatasetInfo& info, std::string_view source, const std::string& table) {
  const auto& names = info.class_names;
  if (static_cast<std::int64_t>(names.size()) > info.num_classes) {
    throw DataError(fmt::format("data source '{}' ([{}]) names {} classes but has only {} (num_classes); a source "
                                "names at most its classes",
                                source, table, names.size(), info.num_classes));
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (const char* fault = name_fault(names[i])) {
      throw DataError(fmt::format("data source '{}' ([{}]): the name of class {} {} ({})", source, table, i, fault,
                                  io::json_quoted(names[i])));
    }
  }
}

std::optional<std::string> class_names_conflict(const ClassNames& a, std::string_view a_what, const ClassNames& b,
                                                std::string_view b_what) {
  const std::size_t common = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (a[i] != b[i]) {
      return fmt::format("class {} is {} in {} but {} in {}", i, io::json_quoted(a[i]), a_what,
                         io::json_quoted(b[i]), b_what);
    }
  }
  return std::nullopt;
}

std::string class_names_summary(const ClassNames& names) {
  if (names.empty()) return "no names";
  std::string all;
  for (const std::string& n : names) all.append(n).push_back('\0');
  return fmt::format("{} names, {} ... {}, crc32c {:08x}", names.size(), io::json_quoted(names.front()),
                     io::json_quoted(names.back()), io::crc32c(all.data(), all.size()));
}

std::string class_names_brief(const ClassNames& names) {
  if (names.empty()) return "";
  if (names.size() == 1) return fmt::format("; 1 class named {}", io::json_quoted(names.front()));
  return fmt::format("; {} classes named {} ... {}", names.size(), io::json_quoted(names.front()),
                     io::json_quoted(names.back()));
}

std::string class_names_json(const ClassNames& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + io::json_quoted(names[i]);
  return out + "]";
}

ClassNames parse_class_names(const std::map<std::string, std::string>& metadata, const std::string& file) {
  const auto it = metadata.find(kClassNamesKey);
  if (it == metadata.end()) return {};  // the source named no classes, or an older Kiln wrote it
  const std::string what = fmt::format("{}: metadata '{}'", file, kClassNamesKey);
  const io::JsonValue doc = io::parse_json(it->second, what);
  if (doc.kind != io::JsonValue::Kind::array) {
    throw DataError(fmt::format("{} is not a JSON array; {}", what, kDamagedHint));
  }
  ClassNames names;
  for (const io::JsonValue& v : doc.array) {
    if (v.kind != io::JsonValue::Kind::string || name_fault(v.text)) {
      throw DataError(fmt::format("{}: entry {} is not a class name; {}", what, names.size(), kDamagedHint));
    }
    names.push_back(v.text);
  }
  return names;
}

}  // namespace kiln::train
