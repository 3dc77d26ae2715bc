// What `kiln train --profile` measures and how it is shown: per-op totals over the profiled
// steps, the machine's measured reference peaks, and the table / JSON made from them
// (docs/profiling.md explains every column).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/tensor.hpp"

namespace kiln::profile {

/// The work one call does: floating-point operations (0: not counted for this op) and the bytes
/// of its operands (each tensor read or written once: a lower bound on memory traffic).
struct Work {
  double flops = 0;
  double bytes = 0;
};

/// Totals for one (op, dtype) row.
struct OpStats {
  std::int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
};

/// Reference rates measured on this machine before training (0: not measured).
struct Peaks {
  double flops_per_s = 0;     ///< best 2048^3 matmul (the compute dtype where the backend has it)
  std::string flops_what;     ///< "matmul f32 2048x2048x2048"
  double bytes_per_s = 0;     ///< best 64 MiB copy (bytes read + written per second)
};

/// Live device memory as the backend's caching allocator reports it (Backend::counters():
/// "allocator_allocated_mib", "allocator_peak_mib"; the cuda backend has them, the cpu backend
/// not). Read at each profiled step's start and after each op, when the op's own temporaries are
/// already freed: a peak far above `most_after_op_mib` comes from temporaries inside an op
/// (workspaces) or from before the first step (the allocator's peak counts from its start, the
/// model's build included), one close to it from what a step keeps live between ops.
struct MemoryReadings {
  bool reported = false;
  double at_step_start_mib = 0;   ///< the largest at a profiled step's start
  double most_after_op_mib = 0;   ///< the largest after any op
  std::string most_after_op;      ///< that op's row ("conv2d_forward bf16")
  double peak_mib = 0;            ///< the allocator's own peak since the backend started
};

struct Profile {
  /// Rows keyed "op dtype" ("conv2d_forward f16", "copy f32").
  std::map<std::string, OpStats> ops;
  std::int64_t steps = 0;       ///< steps counted (after warm-up)
  std::int64_t warmup = 0;      ///< steps skipped first
  double step_seconds = 0;      ///< their wall time, summed
  Peaks peaks;
  MemoryReadings memory;
};

/// The per-op table, rows by total time (largest first), with a last row for the step time the
/// ops do not explain (host code, waiting for data or all-reduces). `device` heads it: the CPU
/// model and ISA or the GPU.
std::string format_table(const Profile& profile, const std::string& device);

/// The same as one JSON object: {"device", "steps", "warmup_steps", "step_ms", "peaks": {...},
/// "ops": [{"op", "dtype", "calls", "total_ms", "share", "gflops", "gbps"}...]} (gflops/gbps null
/// where the op's work is not counted).
std::string to_json(const Profile& profile, const std::string& device);

}  // namespace kiln::profile
