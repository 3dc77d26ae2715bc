// resolved_toml(): the configuration as the run used it, kept in the run directory.
//
// Each validated table is printed by toml++ on its own (a document holding just that table at
// its dotted path), so tables appear in validation order rather than toml++'s sorted order and
// [data.train] prints as a nested table. Integers widened to floats print as floats (1.0), so
// parsing the text again and validating yields the same values.
#include <fmt/format.h>

#include <sstream>

#include "config_impl.hpp"

namespace kiln::config {
namespace {

template <class T>
toml::array to_array(const std::vector<T>& values) {
  toml::array out;
  for (const T& v : values) out.push_back(v);
  return out;
}

void insert_param(toml::table& table, const std::string& key, const ParamValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t> ||
                      std::is_same_v<T, double> || std::is_same_v<T, std::string>) {
          table.insert_or_assign(key, v);
        } else {
          table.insert_or_assign(key, to_array(v));
        }
      },
      value);
}

}  // namespace

std::string Config::resolved_toml() const {
  const Impl& I = *impl_;
  std::ostringstream out;
  out << "# Resolved configuration of " << I.source
      << ": every table the run read, with defaults written out.\n";
  for (const ValidatedTable& v : I.validated) {
    toml::table doc;
    toml::table* leaf = &doc;
    for (const std::string& part : split_path(v.name)) {
      leaf = leaf->insert(part, toml::table{}).first->second.as_table();
    }
    if (v.type) leaf->insert_or_assign("type", *v.type);
    for (const auto& [key, param] : v.values.entries()) insert_param(*leaf, key, param.value);
    out << '\n' << doc << '\n';
  }
  return out.str();
}

}  // namespace kiln::config
