// Gradient accumulation: one optimizer step per `accumulate_steps` micro-batches.
//
// The loader's steps of an epoch are grouped in order: steps [0, N) are group 0, [N, 2N) group
// 1, ...; the epoch's last group is shorter when the steps do not divide by N (groups never span
// two epochs, so an epoch still ends with an optimizer step). Within a group, each micro-step's
// backward adds (+=) into the gradients; only the group's last micro-step hands GradSync its
// ready callback, so the all-reduce of the summed gradients runs once per group, overlapped with
// that last backward, and the intermediate micro-steps make no collective at all. Every
// micro-step scales its loss gradient by 1 / (global rows of the whole group), so the summed
// gradient is that of the mean loss over all the group's rows: the same as one step over a batch
// N times as large (up to f32 rounding of the sums). The LR schedule, `step` in metrics and
// checkpoint positions count optimizer steps. With N = 1 this is exactly the loop without
// accumulation.
#pragma once

#include <cstdint>

#include "kiln/data/data_loader.hpp"

namespace kiln::train {

/// Where a loader step stands in its accumulation group.
struct MicroStep {
  bool first = false;            ///< the group's first micro-step
  bool last = false;             ///< the group's last: all-reduce, optimizer step
  std::int64_t group = 0;        ///< the group's index in the epoch (= optimizer step in the epoch)
  std::int64_t group_rows = 0;   ///< rows summed over all ranks and all the group's micro-steps
};

class AccumulationPlan {
 public:
  /// `shard` must carry the source's sample count. Throws ConfigError for accumulate_steps < 1.
  AccumulationPlan(const data::ShardOptions& shard, std::int64_t accumulate_steps);

  std::int64_t accumulate_steps() const noexcept { return n_; }
  std::int64_t loader_steps_per_epoch() const noexcept { return sharder_.steps_per_epoch(); }
  /// Optimizer steps per epoch: ceil(loader steps / N).
  std::int64_t updates_per_epoch() const noexcept;
  /// Loader steps of the epoch done after `updates` optimizer steps of it.
  std::int64_t loader_steps_after(std::int64_t updates) const noexcept;
  /// The micro-step that loader step `step` (0 <= step < loader_steps_per_epoch()) is.
  MicroStep at(std::int64_t step) const;

 private:
  data::Sharder sharder_;
  std::int64_t n_;
};

}  // namespace kiln::train
