// stop_if_loss_nonfinite (see the header).
#include "kiln/train/loss_guard.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "kiln/errors.hpp"
#include "kiln/train/param_sync.hpp"

namespace kiln::train {

void stop_if_loss_nonfinite(Backend& backend, Communicator& comm, int world_size, double local_loss_sum,
                            const LossStepPlace& place) {
  const bool here = !std::isfinite(local_loss_sum);
  bool anywhere = here;
  if (world_size > 1) anywhere = sum_over_ranks(backend, comm, {here ? 1.0 : 0.0})[0] > 0;
  if (!anywhere) return;
  // With [run] loss_check_every > 1 the loss went non-finite somewhere since the last check.
  const std::string where =
      place.first_unchecked_step < place.step
          ? fmt::format("steps {}-{}/{}", place.first_unchecked_step + 1, place.step + 1, place.steps)
          : fmt::format("step {}/{}", place.step + 1, place.steps);
  throw NumericError(fmt::format(
      "epoch {}/{} {}: the training loss is {} ({}); the run diverged, so it stops here and writes no "
      "checkpoint for this epoch (earlier ones are kept). Lower optimizer.lr (now {:g}), check the data, or set "
      "run.stop_on_nonfinite_loss = false to train on regardless",
      place.epoch + 1, place.epochs, where,
      here ? (std::isnan(local_loss_sum) ? "nan" : "inf") : "not finite",
      here ? "on this rank" : "on another rank", place.lr));
}

}  // namespace kiln::train
