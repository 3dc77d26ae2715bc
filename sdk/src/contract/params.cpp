// ParamMap lookups with messages that name the table, key and origin.
#include "kiln/params.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln {

void ParamMap::set(std::string key, ParamValue value, std::string origin) {
  values_[std::move(key)] = Param{std::move(value), std::move(origin)};
}

bool ParamMap::contains(std::string_view key) const { return values_.find(key) != values_.end(); }

const Param& ParamMap::find(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    throw ConfigError(fmt::format("[{}] has no parameter '{}' (a plugin asked for a key its schema "
                                  "does not declare)",
                                  table_, key));
  }
  return it->second;
}

std::string ParamMap::where(std::string_view key) const {
  auto it = values_.find(key);
  const std::string full = table_.empty() ? std::string(key) : table_ + "." + std::string(key);
  if (it == values_.end()) return full;
  return fmt::format("{} ({})", full, it->second.origin);
}

void ParamMap::type_mismatch(std::string_view key, const char* wanted) const {
  throw ConfigError(fmt::format("{} is not a {} (the plugin's schema and code disagree)", where(key), wanted));
}

}  // namespace kiln
