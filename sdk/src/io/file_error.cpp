// kiln::sdk::file_error: the message format of errors located in an input file.
#include "kiln/sdk/file_error.hpp"

#include <fmt/format.h>

namespace kiln::sdk {

DataError file_error(const std::filesystem::path& path, std::int64_t line, std::int64_t column,
                     std::string_view what) {
  if (line <= 0) return DataError(fmt::format("{}: {}", path.string(), what));
  if (column <= 0) return DataError(fmt::format("{}:{}: {}", path.string(), line, what));
  return DataError(fmt::format("{}:{}:{}: {}", path.string(), line, column, what));
}

}  // namespace kiln::sdk
