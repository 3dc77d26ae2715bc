// The `mpi` rendezvous's one use of MPI: rank 0 tells every rank where its TCP store listens.
#pragma once

#include <string>

#include "kiln/communicator.hpp"

namespace kiln::dist::detail {

/// Rank 0's `text` on every rank, sent with MPI_Bcast by libkiln_mpi_rendezvous.so, which is
/// loaded (RTLD_GLOBAL, as Open MPI's own components need) from libkiln_core's directory.
/// Throws CommError if the library is missing or MPI fails, naming the library and the cause.
std::string mpi_broadcast_from_rank0(const std::string& text, const RankInfo& ranks);

}  // namespace kiln::dist::detail
