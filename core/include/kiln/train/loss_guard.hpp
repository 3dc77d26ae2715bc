// The stops on a diverged run. A training loss that became inf or nan ends the run with an error
// naming the epoch and step, instead of training on garbage and writing a checkpoint of it
// ([run] stop_on_nonfinite_loss, on by default). Only the loss value counts: a step fp16's loss
// scaler skips for non-finite gradients is normal and handled by the precision policy.
// The loss of a step is computed before its update, so a step whose non-finite gradients were
// applied (fp32 and bf16 check gradients only with check_finite = true) shows in the next
// step's loss; when that step is an epoch's last, its checkpoint would come first. So with
// stop_on_nonfinite_loss on, no checkpoint is written of weights that are not finite: it would
// push a good checkpoint out (checkpoint_keep) for one nothing can resume from.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/model.hpp"

namespace kiln::train {

/// Where the check is made, for the message (epoch and step are 0-based here, printed 1-based).
struct LossStepPlace {
  std::int64_t epoch = 0, epochs = 0;
  std::int64_t step = 0, steps = 0;
  std::int64_t first_unchecked_step = 0;  ///< the window since the last check starts here
  double lr = 0;
};

/// Throws NumericError when `local_loss_sum` (this rank's running loss sum for the epoch) or that
/// of any other rank is not finite. With several ranks, every rank stops at the same step rather
/// than leaving the others in the next collective: when `every_rank_finite` (the loss mark came
/// through the gradients' sum clean, loss_mark.hpp) there is nothing to ask; otherwise one flag is
/// summed over the ranks. Every rank must pass the same `every_rank_finite`.
void stop_if_loss_nonfinite(Backend& backend, Communicator& comm, int world_size, double local_loss_sum,
                            bool every_rank_finite, const LossStepPlace& place);

/// Throws NumericError naming the first parameter or floating-point buffer of `model` that holds
/// inf or NaN, on this rank or (the flags summed over ranks) any other, so that every rank stops
/// before the collective writing `checkpoint` (a path, for the message) would begin.
void stop_if_weights_nonfinite(Backend& backend, Communicator& comm, const Model& model, const std::string& checkpoint);

}  // namespace kiln::train
