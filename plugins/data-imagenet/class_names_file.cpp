// Reading a class names file (see class_names_file.hpp).
#include "class_names_file.hpp"

#include <fmt/format.h>

#include "file_util.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/utf8.hpp"

namespace kiln::imagenet {

std::vector<std::string> read_class_names_file(const std::string& path, const std::string& where,
                                               std::int64_t num_classes) {
  constexpr std::uint64_t kMaxBytes = 16u << 20;  // 21k ImageNet classes take well under 1 MiB
  const File file = [&] {
    try {
      return File(path);
    } catch (const DataError& e) {  // "<path>: cannot open: ...", and which parameter named it
      throw DataError(fmt::format("{}; set by {}", e.what(), where));
    }
  }();
  const std::uint64_t size = file.size();
  if (size > kMaxBytes) {
    throw DataError(fmt::format("{}: {} bytes, over the 16 MiB a class names file may have; is {} the right file?",
                                path, size, where));
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!file.read_at(0, text.data(), text.size())) {
    throw DataError(fmt::format("{}: file shrank while being read (expected {} bytes)", path, size));
  }

  std::vector<std::string> names;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t line_no = names.size() + 1;
    if (line.empty()) {
      throw DataError(fmt::format("{}:{}: empty line; {} names one class per line, class 0 first", path, line_no,
                                  where));
    }
    for (const char c : line) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        throw DataError(fmt::format("{}:{}: control character 0x{:02x} in a class name ({})", path, line_no, u, where));
      }
    }
    if (!sdk::is_utf8(line)) {
      // JSON (the checkpoint's names) could keep such bytes only as other characters.
      throw DataError(fmt::format("{}:{}: a class name that is not UTF-8 ({}); convert the file, e.g. with iconv -f "
                                  "latin1 -t utf8",
                                  path, line_no, where));
    }
    names.push_back(std::move(line));
    start = end + 1;
  }
  if (static_cast<std::int64_t>(names.size()) != num_classes) {
    throw DataError(fmt::format("{}: {} names, but the split has {} classes (num_classes); {} needs one line per "
                                "class",
                                path, names.size(), num_classes, where));
  }
  return names;
}

}  // namespace kiln::imagenet
