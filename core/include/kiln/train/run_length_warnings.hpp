// Settings that a run of `run.epochs` epochs never reaches: a warmup longer than the run, step
// milestones at or after its end, a plateau or early-stopping patience that needs more epochs
// than the run has, weight histograms every more epochs than it has. Each is legitimate in a
// short trial of a long recipe (`--set run.epochs=2` on a 90-epoch config), so they are warnings
// at the run's start, not errors; unsaid, such a run trains at rates the recipe never meant, or
// waits for a stop or a histogram that cannot come, without a word.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/train/core_tables.hpp"

namespace kiln::train {

/// One sentence per setting the run never reaches, naming the key and where it was set.
std::vector<std::string> run_length_warnings(const CoreTables& core, std::int64_t epochs);

}  // namespace kiln::train
