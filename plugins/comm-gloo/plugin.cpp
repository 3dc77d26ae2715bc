// Descriptor of libkiln-comm-gloo.so: the `gloo` communicator and its parameter schema.
#include <kiln/sdk/plugin.hpp>

#include "gloo_communicator.hpp"

namespace {

constexpr kiln_param_spec_v1 kGlooParams[] = {
    {"algorithm", KILN_PARAM_STRING, "\"ring\"", "ring|ring_chunked|halving_doubling|bcube",
     "All-reduce algorithm: ring (segmented reduce-scatter + all-gather), ring_chunked, "
     "halving_doubling, or bcube (world size a power of bcube_base)"},
    {"interface", KILN_PARAM_STRING, "\"\"", nullptr,
     "Network interface for TCP (\"lo\", \"eth0\"); empty resolves this host's name"},
    {"bcube_base", KILN_PARAM_INT, "2", nullptr, "Group size of the bcube algorithm", "2", "64"},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Communicator, kiln::gloo_comm::GlooCommunicator>(
    "gloo", "0.1.0", "Gloo collectives over TCP on host memory (ring, ring_chunked, "
    "halving_doubling, bcube)", kGlooParams));
