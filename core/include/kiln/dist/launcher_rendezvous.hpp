// The rendezvous a launcher implies when none is configured (docs/distributed.md):
//
//   torchrun (and RANK/WORLD_SIZE set by hand) with MASTER_ADDR and MASTER_PORT
//       -> tcp://MASTER_ADDR:MASTER_PORT, or MASTER_PORT + 1 when TORCHELASTIC_USE_AGENT_STORE
//          is "True": torchrun's agent then serves its own (PyTorch) TCP store on MASTER_PORT
//          and rank 0's host is the one at MASTER_ADDR, so the next port is Kiln's.
//   Open MPI (OMPI_COMM_WORLD_*)
//       -> mpi: rank 0 serves a TCP store on a free port and broadcasts its addresses with
//          MPI_Bcast, so no shared directory and no fixed port are needed.
//   anything else (kiln --nproc sets KILN_RENDEZVOUS itself; Slurm, PMI, --rank) -> none.
#pragma once

#include <optional>
#include <string>

#include "kiln/communicator.hpp"
#include "kiln/launch/ranks.hpp"

namespace kiln::dist {

struct RendezvousChoice {
  std::string spec;  ///< for make_store
  std::string from;  ///< for the banner: why this one
};

/// The launcher's rendezvous for `ranks` (resolved from `env`), or nullopt. Throws ConfigError
/// if MASTER_PORT is not a port number.
std::optional<RendezvousChoice> launcher_rendezvous(const RankInfo& ranks,
                                                    const launch::EnvLookup& env = launch::process_env());

}  // namespace kiln::dist
