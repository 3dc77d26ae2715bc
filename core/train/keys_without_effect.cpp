// Refusing the keys of a feature that is off (see the header).
#include "kiln/train/keys_without_effect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/run_identity.hpp"

namespace kiln::train {

void refuse_keys_without_effect(const ParamMap& table, std::span<const kiln_param_spec_v1> schema,
                                std::initializer_list<std::string_view> keys, std::string_view why_off) {
  for (std::string_view key : keys) {
    const auto spec = std::find_if(schema.begin(), schema.end(), [&](const auto& s) { return key == s.name; });
    if (spec == schema.end() || spec->default_value == nullptr || !table.contains(key)) continue;
    const ParamValue& value = table.entries().find(key)->second.value;
    const std::string what = fmt::format("the default of {}.{}", table.table(), key);
    if (value == config::parse_literal(spec->default_value, spec->type, what)) continue;
    throw ConfigError(fmt::format("{} = {} has no effect: {}", table.where(key), param_text(value), why_off));
  }
}

}  // namespace kiln::train
