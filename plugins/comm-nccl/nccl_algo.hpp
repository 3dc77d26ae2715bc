// The NCCL_ALGO value each plugin pins, and the checks on the CUDA device the communicator uses.
//
// Plain C++ (no call into NCCL or CUDA), so CI tests it without a GPU.
//
// Decisions: the plugins pin the algorithm of all-reduce only, with NCCL's per-function syntax
// (NCCL >= 2.24: NCCL_ALGO="allreduce:tree"). A bare NCCL_ALGO=Tree applies to every
// collective, and Tree implements only all-reduce, so broadcast (the initial parameter
// broadcast) and all-gather then fail with "no algorithm/protocol available" as soon as there are
// two ranks (with one rank NCCL never chooses an algorithm, so one-rank tests cannot see it).
// Broadcast, all-gather and the barrier keep NCCL's own choice. With an NCCL older than 2.24
// `nccl-ring` falls back to the bare "Ring" (ring implements every collective Kiln uses), and
// `nccl-tree` is refused: there is no way to pin tree for all-reduce alone.
#pragma once

#include <optional>
#include <string>

namespace kiln::nccl {

/// Which NCCL algorithm a plugin pins (for all-reduce).
enum class Algo : unsigned char { ring = 0, tree = 1 };

/// First NCCL version (ncclGetVersion's X*10000 + Y*100 + Z) that reads "function:algo" lists.
inline constexpr int kPerFunctionAlgoVersion = 22400;

/// The NCCL_ALGO value pinned while `algo`'s communicator is created with NCCL `nccl_version`:
/// "allreduce:ring" / "allreduce:tree" from 2.24; "Ring" before that for ring; nullopt (refused)
/// for tree before 2.24.
std::optional<std::string> algo_env_value(Algo algo, int nccl_version);

/// "Ring" / "Tree": the algorithm's name in messages and describe().
const char* algo_display_name(Algo algo) noexcept;
/// "nccl-ring" / "nccl-tree": the plugin name.
const char* algo_plugin_name(Algo algo) noexcept;

/// "2.28.3" from ncclGetVersion's code.
std::string nccl_version_text(int nccl_version);

/// Why the communicator cannot use CUDA device `backend_device` (the ordinal the backend computes
/// on, Backend::device().index) when `visible_devices` are visible; nullopt if it can. The
/// communicator must run on the backend's device: its buffers and stream live there.
std::optional<std::string> device_problem(int backend_device, int visible_devices);

}  // namespace kiln::nccl
