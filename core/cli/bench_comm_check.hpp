// The values `kiln bench-comm` checks a collective with (nccl-tests' -c 1 / #wrong): each rank
// fills its input with small rank-dependent integers, 1 + (rank + i) % 4, which stay exact in
// every dtype for the sums of up to 512 ranks, so the reduced result is known on every rank and
// an element either matches it (within the dtype's rounding) or counts as wrong.
#pragma once

#include <cstdint>

#include "kiln/communicator.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cli {

/// Element i of rank `rank`'s input.
double check_input_value(int rank, std::int64_t i);
/// Element i of the result of reducing every rank's input with `op` over `world` ranks.
double check_expected_value(ReduceOp op, int world, std::int64_t i);
/// Relative difference below which a result element counts as right in `dtype`.
double check_tolerance(DType dtype);

/// Element i of a host tensor (f32, f64, f16 or bf16) as a double, and the reverse (rounded to
/// nearest even through kiln/sdk/half.hpp, Kiln's one host conversion). Other dtypes are a
/// ConfigError: bench-comm offers only these four.
double load_host_value(const Tensor& t, std::int64_t i);
void store_host_value(const Tensor& t, std::int64_t i, double v);

}  // namespace kiln::cli
