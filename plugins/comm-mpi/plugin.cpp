// Descriptor of libkiln-comm-mpi.so: the `mpi` communicator (no parameters: MPI picks its own
// transport and algorithms, tuned through MPI's own environment, e.g. OMPI_MCA_*).
#include <kiln/sdk/plugin.hpp>

#include "mpi_communicator.hpp"

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Communicator, kiln::mpi_comm::MpiCommunicator>(
    "mpi", "0.1.0", "MPI collectives on host memory (Open MPI: shared memory on one host, "
    "its network transports across hosts); run under mpirun"));
