// libkiln-comm-nccl.so: exports two communicator plugins from one library, `nccl-ring` and
// `nccl-tree`, sharing every line of code; they differ only in the all-reduce algorithm pinned
// (NCCL_ALGO="allreduce:ring" / "allreduce:tree") while their communicator is created; other
// collectives keep NCCL's choice (nccl_algo.hpp). Same parameters for both.
#include <kiln/sdk/plugin.hpp>

#include "nccl_communicator.hpp"

namespace {

constexpr kiln_param_spec_v1 kNcclParams[] = {
    {"nccl_debug", KILN_PARAM_STRING, "\"WARN\"", "VERSION|WARN|INFO|TRACE",
     "NCCL_DEBUG level used when the environment does not set NCCL_DEBUG itself."},
    {"max_ctas", KILN_PARAM_INT, "0", nullptr,
     "Upper bound on the CUDA blocks NCCL uses per collective (ncclConfig_t.maxCTAs); 0 lets NCCL choose."},
};

}  // namespace

KILN_PLUGIN_LIBRARY(
    kiln::sdk::plugin<kiln::Communicator, kiln::nccl::NcclRingCommunicator>(
        "nccl-ring", "0.1.0", "NCCL on CUDA devices with ring all-reduce pinned (NCCL_ALGO=allreduce:ring)", kNcclParams),
    kiln::sdk::plugin<kiln::Communicator, kiln::nccl::NcclTreeCommunicator>(
        "nccl-tree", "0.1.0", "NCCL on CUDA devices with tree all-reduce pinned (NCCL_ALGO=allreduce:tree)", kNcclParams));
