// Initial parameter agreement: rank 0's values are broadcast to every rank (never trusted to
// seeds), then a checksum of each rank's parameters is all-gathered and compared, so a broken
// broadcast or a model that builds differently per rank fails before the first step.
#pragma once

#include <span>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/model.hpp"

namespace kiln::train {

/// Broadcasts every parameter storage (and model buffer) from rank 0 and verifies checksums.
/// Throws CommError naming the ranks whose parameters differ.
void broadcast_initial_parameters(Backend& backend, Communicator& comm, std::span<const Parameter> params,
                                  std::span<const ModelBuffer> buffers);

/// Reduces `values` (sums) over all ranks; used for metrics. Returns the reduced values.
std::vector<double> sum_over_ranks(Backend& backend, Communicator& comm, const std::vector<double>& values);

}  // namespace kiln::train
