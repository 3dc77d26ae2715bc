// `kiln bench-comm`: all-reduce bandwidth of any communicator plugin, printed exactly like
// NVIDIA's nccl-tests (all_reduce_perf): same flags (-b -e -f -i -n -w -c -d -o), same table,
// busbw = algbw * 2(n-1)/n, plus --comm/--backend/--set to choose plugins and --json.
//
// Multi-rank: run one copy per rank with the training launch variables (RANK/WORLD_SIZE/...,
// OMPI_*, PMI_*, SLURM_*) and KILN_RENDEZVOUS=file:<dir>, or pass --nproc N to start and
// supervise N local ranks (kiln::launch::supervise). Only rank 0 prints. docs/bench-comm.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

/// Runs `kiln bench-comm <args...>` (`args` are the words after "bench-comm"), loading plugins
/// from `plugin_dirs` (--plugin-path), KILN_PLUGIN_PATH and the install dir; rank 0 writes the
/// table (or JSON) to `out`. Returns 0, or 1 if any element was wrong (-c). Throws ConfigError
/// for bad flags, PluginError/CommError/BackendError from the plugins.
int run_bench_comm_command(const std::vector<std::string>& args,
                           const std::vector<std::filesystem::path>& plugin_dirs, std::ostream& out);

/// "32M" -> 33554432 (K, M, G are powers of 1024, as in nccl-tests; a trailing B is allowed).
/// Throws ConfigError naming `flag`. Exposed for tests.
std::int64_t parse_byte_size(const std::string& text, const std::string& flag);

}  // namespace kiln::cli
