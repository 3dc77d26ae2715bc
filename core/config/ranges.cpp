// Range checks of schema values (see ranges.hpp).
#include "ranges.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/config/config.hpp"
#include "values.hpp"

namespace kiln::config {
namespace {

bool numeric(std::uint32_t type) {
  const std::uint32_t t = is_list_type(type) ? element_type(type) : type;
  return t == KILN_PARAM_INT || t == KILN_PARAM_FLOAT;
}

bool is_float(std::uint32_t type) { return type == KILN_PARAM_FLOAT || type == KILN_PARAM_FLOAT_LIST; }

/// A bound literal as a number; nullopt when it is not one. long double holds every int64 bound
/// exactly on x86-64, so integer comparisons stay exact.
std::optional<long double> parse_bound(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  std::string s;
  for (const char* p = text; *p; ++p) {
    if (*p != '_') s += *p;  // TOML allows 1_000
  }
  errno = 0;
  char* end = nullptr;
  const long double v = std::strtold(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || errno == ERANGE || std::isnan(v)) return std::nullopt;
  return v;
}

std::string lower_rule(const kiln_param_spec_v1& spec) {
  return (spec.flags & KILN_PARAM_MIN_EXCLUSIVE) ? "> " : ">= ";
}
std::string upper_rule(const kiln_param_spec_v1& spec) {
  return (spec.flags & KILN_PARAM_MAX_EXCLUSIVE) ? "< " : "<= ";
}

std::string bounds_text(const kiln_param_spec_v1& spec) {
  const bool lo = spec.min != nullptr, hi = spec.max != nullptr;
  if (lo && hi) {
    return fmt::format("in {}{}, {}{}", (spec.flags & KILN_PARAM_MIN_EXCLUSIVE) ? "(" : "[", spec.min, spec.max,
                       (spec.flags & KILN_PARAM_MAX_EXCLUSIVE) ? ")" : "]");
  }
  if (lo) return lower_rule(spec) + spec.min;
  if (hi) return upper_rule(spec) + spec.max;
  return {};
}

std::optional<std::string> miss_of(long double v, bool is_float_value, const kiln_param_spec_v1& spec) {
  if (is_float_value && !std::isfinite(v)) {
    if (spec.flags & KILN_PARAM_ALLOW_NONFINITE) {
      if (std::isnan(v)) return std::nullopt;  // nan compares false with every bound: allowed on purpose
    } else {
      return std::string("must be a finite number");
    }
  }
  const auto lo = parse_bound(spec.min);
  const auto hi = parse_bound(spec.max);
  const bool below = lo && ((spec.flags & KILN_PARAM_MIN_EXCLUSIVE) ? !(v > *lo) : !(v >= *lo));
  const bool above = hi && ((spec.flags & KILN_PARAM_MAX_EXCLUSIVE) ? !(v < *hi) : !(v <= *hi));
  if (below || above) return "must be " + bounds_text(spec);
  return std::nullopt;
}

template <class T>
std::optional<RangeMiss> check_list(const std::vector<T>& list, const kiln_param_spec_v1& spec) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (auto rule = miss_of(static_cast<long double>(list[i]), std::is_floating_point_v<T>, spec)) {
      return RangeMiss{i, fmt::format("{}", list[i]), *rule};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<RangeMiss> check_range(const ParamValue& value, const kiln_param_spec_v1& spec) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) {
    if (auto rule = miss_of(static_cast<long double>(*i), false, spec)) return RangeMiss{std::nullopt, fmt::format("{}", *i), *rule};
  } else if (const auto* d = std::get_if<double>(&value)) {
    if (auto rule = miss_of(static_cast<long double>(*d), true, spec)) return RangeMiss{std::nullopt, fmt::format("{}", *d), *rule};
  } else if (const auto* il = std::get_if<std::vector<std::int64_t>>(&value)) {
    return check_list(*il, spec);
  } else if (const auto* dl = std::get_if<std::vector<double>>(&value)) {
    return check_list(*dl, spec);
  }
  return std::nullopt;
}

std::string range_spec_problem(const kiln_param_spec_v1& spec) {
  if (spec.min == nullptr && spec.max == nullptr) return {};
  if (!numeric(spec.type)) return "has a min or max but is not a number or number list";
  if (spec.min != nullptr && !parse_bound(spec.min)) return fmt::format("has min '{}', which is not a number", spec.min);
  if (spec.max != nullptr && !parse_bound(spec.max)) return fmt::format("has max '{}', which is not a number", spec.max);
  if (spec.min != nullptr && spec.max != nullptr && *parse_bound(spec.min) > *parse_bound(spec.max)) {
    return fmt::format("has min {} above max {}", spec.min, spec.max);
  }
  return {};
}

std::string param_range_text(const kiln_param_spec_v1& spec) {
  std::string text = bounds_text(spec);
  if (is_float(spec.type) && !(spec.flags & KILN_PARAM_ALLOW_NONFINITE)) {
    text = text.empty() ? "finite" : text + ", finite";
  }
  return text;
}

}  // namespace kiln::config
