// The stop on a diverged run: a training loss that became inf or nan ends the run with an error
// naming the epoch and step, instead of training on garbage and writing a checkpoint of it
// ([run] stop_on_nonfinite_loss, on by default). Only the loss value counts: a step fp16's loss
// scaler skips for non-finite gradients is normal and handled by the precision policy.
#pragma once

#include <cstdint>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"

namespace kiln::train {

/// Where the check is made, for the message (epoch and step are 0-based here, printed 1-based).
struct LossStepPlace {
  std::int64_t epoch = 0, epochs = 0;
  std::int64_t step = 0, steps = 0;
  std::int64_t first_unchecked_step = 0;  ///< the window since the last check starts here
  double lr = 0;
};

/// Throws NumericError when `local_loss_sum` (this rank's running loss sum for the epoch) or that
/// of any other rank is not finite. With several ranks, one flag is summed over all of them so
/// that every rank stops at the same step rather than leaving the others in the next collective.
void stop_if_loss_nonfinite(Backend& backend, Communicator& comm, int world_size, double local_loss_sum,
                            const LossStepPlace& place);

}  // namespace kiln::train
