// The precision-policy checks of `kiln plugins test FILE`: the contract of
// kiln/precision_policy.hpp exercised on the cpu backend with four parameters laid out as a
// model's ParameterStore lays them out (three in one arena, one in a storage of its own), one
// line per check. What each check asks is listed in conformance.hpp.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "conformance.hpp"
#include "kiln/precision_policy.hpp"

namespace kiln::cli {

/// Runs the precision checks with `backend` on policies from `make` (created, nothing called
/// yet); every check after `backend` asks for a fresh one, as a new run would.
std::vector<CheckLine> check_precision(const std::function<std::shared_ptr<PrecisionPolicy>()>& make,
                                       Backend& backend);

}  // namespace kiln::cli
