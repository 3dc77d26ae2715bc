// The mlp's size before it is built: its parameter count from its own config, checked for
// overflow and against the machine's memory, so that a config such as 100,000 hidden layers or a
// class count of 2^62 is refused with both numbers instead of hanging or wrapping the arena size.
#pragma once

#include <cstdint>
#include <vector>

#include <kiln/params.hpp>

namespace kiln::mlp {

/// Weights and biases of Linear(in_features -> hidden... -> classes); throws ConfigError naming
/// the keys when the count overflows 64 bits.
std::int64_t mlp_parameter_count(const ParamMap& p, std::int64_t in_features, const std::vector<std::int64_t>& hidden,
                                 std::int64_t classes);

/// Throws ConfigError when `parameters` f32 values, their gradients and Adam's two moment buffers
/// (16 bytes each) need more than `physical_bytes`.
void check_fits_in_memory(const ParamMap& p, std::int64_t parameters, std::uint64_t physical_bytes);

/// Physical memory of this machine (sysconf); 0 when unknown, which skips the check.
std::uint64_t physical_memory_bytes();

}  // namespace kiln::mlp
