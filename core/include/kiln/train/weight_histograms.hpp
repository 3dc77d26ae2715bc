// The histograms [log] histograms_every_epochs writes to TensorBoard: one per parameter, of its
// master values, tagged "weights/<name>" (Keras writes its weights' histograms under the layer's
// names the same way). Rank 0 writes them; every rank holds the same weights.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/io/histogram.hpp"
#include "kiln/model.hpp"

namespace kiln::train {

/// Copies each parameter's master value to the host (f32, or bf16/f16 widened) and makes its
/// histogram (io::histogram_of, 30 buckets).
std::vector<std::pair<std::string, io::Histogram>> weight_histograms(Backend& backend,
                                                                     std::span<const Parameter> params);

}  // namespace kiln::train
