// Keys of an optional feature that is off: `[early_stop] patience = 5` without a metric, or
// `[checkpoint] keep_best_mode = "min"` without keep_best, would change nothing and say nothing.
// A user who wrote one expects an effect, so such a key is refused naming where it was set --
// unless it holds its default, which is what config.toml (every key written out) holds, so a
// run's own config.toml always reruns.
#pragma once

#include <initializer_list>
#include <span>
#include <string_view>

#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::train {

/// Throws ConfigError for the first of `keys` whose value in `table` differs from its default in
/// `schema`: "early_stop.patience (run.toml:4) = 5 has no effect: <why_off>".
void refuse_keys_without_effect(const ParamMap& table, std::span<const kiln_param_spec_v1> schema,
                                std::initializer_list<std::string_view> keys, std::string_view why_off);

}  // namespace kiln::train
