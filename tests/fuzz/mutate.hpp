// Deterministic mutations of a seed input for kiln_fuzz_replay: the kinds of damage libFuzzer's
// mutators start from (flipped bits, bytes and integers set to edge values, truncation, deleted,
// duplicated and inserted runs), chosen by a counter-based generator so that mutation k of a seed
// is the same on every machine and can be made again from its number alone.
#pragma once

#include <cstdint>
#include <string_view>

#include "fuzz_target.hpp"

namespace kiln::fuzz {

/// Mutation `index` of `seed`; `salt` (the target's and seed's names) keeps targets apart.
Bytes mutate(Input seed, std::string_view salt, std::uint64_t index);

}  // namespace kiln::fuzz
