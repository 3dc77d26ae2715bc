// A backend's op table: one row per op of KILN_OPS (kiln/op_table.hpp), in its order, saying which
// dtypes the backend implements it for. Each backend keeps exactly one such table and answers
// Backend::supports() from it, and states
//   static_assert(sdk::lists_every_op_once(kMyOps), "...");
// so an op added to KILN_OPS without a row is a compile error in every in-tree backend rather
// than a silent "unsupported" (the conformance suite then requires f32 for every op).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::sdk {

/// A set of dtypes.
class DTypes {
 public:
  constexpr DTypes() = default;
  constexpr DTypes(std::initializer_list<DType> dtypes) {
    for (const DType d : dtypes) bits_ |= bit(d);
  }
  constexpr bool has(DType d) const noexcept { return (bits_ & bit(d)) != 0; }

 private:
  static constexpr std::uint32_t bit(DType d) noexcept { return 1u << static_cast<unsigned>(d); }
  std::uint32_t bits_ = 0;
};

/// Ops defined over f32 state only (softmax cross-entropy, optimizers).
inline constexpr DTypes kF32Only{DType::f32};
/// The three floating compute dtypes.
inline constexpr DTypes kFloatTypes{DType::f32, DType::bf16, DType::f16};

/// Whether `table` (rows with a member `op`) has one row per op of KILN_OPS, in its order (so
/// op_row() is an index, and a missing or duplicated op is caught at compile time).
template <class Row, std::size_t N>
constexpr bool lists_every_op_once(const Row (&table)[N]) {
  if (N != kOpCount) return false;
  for (std::size_t i = 0; i < N; ++i) {
    if (table[i].op != kAllOps[i]) return false;
  }
  return true;
}

/// The row of `op` in a table that lists_every_op_once; nullptr for a value outside KILN_OPS.
template <class Row, std::size_t N>
constexpr const Row* op_row(const Row (&table)[N], Op op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < N ? &table[i] : nullptr;
}

}  // namespace kiln::sdk
