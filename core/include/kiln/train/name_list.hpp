// Names in a message or log line, cut short: "a, b, c, ... and 40 more".
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::train {

/// The first `shown` of `names` joined with ", ", then "... and N more" for the rest.
inline std::string listed_names(const std::vector<std::string>& names, std::size_t shown) {
  if (names.size() <= shown) return fmt::format("{}", fmt::join(names, ", "));
  return fmt::format("{}, ... and {} more", fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     names.size() - shown);
}

}  // namespace kiln::train
