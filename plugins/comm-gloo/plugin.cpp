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
    {"star_max_bytes", KILN_PARAM_INT, "2097152", nullptr,
     "All-reduces of at most this many bytes divided by (ranks - 1) go through rank 0 (a star over plain TCP, "
     "every rank getting the same bits) instead of the algorithm above: Gloo's TCP transport takes 0.3-6 ms for "
     "a 1-512 KB all-reduce on a few-core machine, the star 0.08-0.6 ms (docs/benchmarks.md). 0 = Gloo for every "
     "size.", "0", "1073741824"},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Communicator, kiln::gloo_comm::GlooCommunicator>(
    "gloo", "0.1.0", "Gloo collectives over TCP on host memory (ring, ring_chunked, "
    "halving_doubling, bcube)", kGlooParams));
