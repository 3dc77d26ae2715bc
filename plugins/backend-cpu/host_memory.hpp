// How much host memory an allocation may still take, for "needs X bytes, Y available" errors.
//
// With Linux's overcommit, malloc of far more than the machine has usually succeeds and the
// process is OOM-killed later, when the pages are touched; so a large request is compared with
// this figure before it is made. Available = MemAvailable + SwapFree from /proc/meminfo, capped
// by the cgroup's remaining allowance (v2 memory.max - memory.current, or v1
// memory.limit_in_bytes - memory.usage_in_bytes), since in a container that limit is what the
// OOM killer enforces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::cpu {

struct HostMemory {
  std::uint64_t bytes = 0;
  std::string source;  ///< where the figure comes from, e.g. "MemAvailable + SwapFree"
};

/// nullopt if neither /proc/meminfo nor a cgroup limit can be read.
std::optional<HostMemory> available_host_memory();

/// Requests at least this large are checked against available_host_memory() (smaller ones are
/// not worth reading /proc for, and cannot exhaust a machine alone).
constexpr std::uint64_t kCheckedAllocationBytes = std::uint64_t{64} << 20;

}  // namespace kiln::cpu
