// The names of the Communicator's reductions ("sum", "avg", "max", "min"), as bench-comm's -o
// flag takes them and as error messages and reports print them: one spelling for the host and
// its tests. (The comm plugins keep their own copy: a plugin sees only the SDK, and adding this
// there would change the contract fingerprint.)
#pragma once

#include <optional>
#include <string_view>

#include "kiln/communicator.hpp"

namespace kiln::dist {

/// The lower-case name of `op`; "?" for a value outside the enum (a corrupt fingerprint).
inline std::string_view reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

/// The reduction whose reduce_op_name() is `name` exactly; nullopt for any other text.
inline std::optional<ReduceOp> reduce_op_named(std::string_view name) noexcept {
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
    if (reduce_op_name(op) == name) return op;
  }
  return std::nullopt;
}

}  // namespace kiln::dist
