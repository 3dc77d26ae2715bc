// Range rules of a parameter schema (kiln_param_spec_v1 min, max, flags; ABI 2.2): the bounds a
// number, or each element of a number list, must lie within, and finiteness of floats. One place
// decides them so a plugin's schema, the core's own tables and `kiln plugins show` agree.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"

namespace kiln::config {

/// A value that breaks its spec's range: which list element (if a list), its spelling, and the
/// rule ("must be > 0", "must be finite").
struct RangeMiss {
  std::optional<std::size_t> index;
  std::string value;
  std::string rule;
};

/// The first element of `value` outside `spec`'s range, if any. Bounds must be valid
/// (check_range_spec()).
std::optional<RangeMiss> check_range(const ParamValue& value, const kiln_param_spec_v1& spec);

/// Empty when `spec`'s min/max/flags are well formed; else what is wrong (a bound that is not a
/// number, a bound on a non-numeric type, min above max).
std::string range_spec_problem(const kiln_param_spec_v1& spec);

}  // namespace kiln::config
