// Who am I: rank, world size and local rank, resolved in a fixed order and logged with the
// source that decided (conventions: explicit -> torchrun -> Open MPI -> PMI -> Slurm -> alone).
//
//   explicit  --rank/--world-size given on the command line (and KILN_LOCAL_RANK if set)
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; named after who set them: "kiln --nproc"
//             (KILN_LAUNCHER=kiln --nproc, set by the supervisor), "torchrun" (TORCHELASTIC_RUN_ID set)
//             or "environment" (set by hand or by another tool)
//   openmpi   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   pmi       PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (only under srun: SLURM_STEP_ID set); the
//             local size from SLURM_NTASKS_PER_NODE, else this node's (SLURM_NODEID) entry of
//             SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of three nodes, then 1)
//   default   rank 0 of 1
// A source is used only if its rank and size variables are both set; values that are not
// integers, or a rank outside [0, size), are ConfigErrors naming the variables.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "kiln/communicator.hpp"

namespace kiln::launch {

/// Reads an environment variable; injectable for tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
/// The process environment.
EnvLookup process_env();

struct ExplicitRanks {
  std::optional<int> rank;
  std::optional<int> world_size;
};

/// Which launcher started this process, by the same rules as resolve_ranks.
enum class Launcher { none, command_line, kiln_nproc, torchrun, environment, openmpi, pmi, slurm };

/// The value of KILN_LAUNCHER the --nproc supervisor gives its ranks.
inline constexpr const char* kKilnNprocLauncher = "kiln --nproc";

Launcher detect_launcher(const ExplicitRanks& explicit_ranks, const EnvLookup& env = process_env());
/// "kiln --nproc", "torchrun", "environment", "openmpi", "pmi", "slurm", "command line", "default".
const char* launcher_name(Launcher launcher);

RankInfo resolve_ranks(const ExplicitRanks& explicit_ranks, const EnvLookup& env = process_env());

}  // namespace kiln::launch
