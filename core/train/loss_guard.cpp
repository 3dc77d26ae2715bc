// stop_if_loss_nonfinite and stop_if_weights_nonfinite (see the header).
#include "kiln/train/loss_guard.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "kiln/errors.hpp"
#include "kiln/sdk/finite_check.hpp"
#include "kiln/train/param_sync.hpp"
#include "kiln/train/collective_purpose.hpp"

namespace kiln::train {

void stop_if_loss_nonfinite(Backend& backend, Communicator& comm, int world_size, double local_loss_sum,
                            bool every_rank_finite, const LossStepPlace& place) {
  const bool here = !std::isfinite(local_loss_sum);
  bool anywhere = here;
  if (world_size > 1 && !every_rank_finite) {
    const CollectivePurpose purpose("loss check");
    anywhere = sum_over_ranks(backend, comm, {here ? 1.0 : 0.0})[0] > 0;
  }
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

namespace {

/// The name of the first tensor among the model's parameters and floating-point buffers that
/// holds inf or NaN, or "". One flag read back per tensor: this runs once per checkpoint.
std::string first_nonfinite_tensor(Backend& backend, const Model& model) {
  sdk::FiniteCheck check;
  const auto nonfinite = [&](const Tensor& t) {
    if (!t.defined() || !backend.supports(Op::check_finite, t.dtype())) return false;  // integer buffers
    return !check.all_finite(backend, std::span<const Tensor>(&t, 1));
  };
  for (const Parameter& p : model.parameters()) {
    if (nonfinite(p.value)) return "parameter '" + p.name + "'";
  }
  for (const ModelBuffer& b : model.buffers()) {
    if (nonfinite(b.value)) return "buffer '" + b.name + "'";
  }
  return "";
}

}  // namespace

void stop_if_weights_nonfinite(Backend& backend, Communicator& comm, const Model& model, const std::string& checkpoint) {
  const std::string here = first_nonfinite_tensor(backend, model);
  bool anywhere = !here.empty();
  if (comm.size() > 1) {
    const CollectivePurpose purpose("weights check before a checkpoint");
    anywhere = sum_over_ranks(backend, comm, {here.empty() ? 0.0 : 1.0})[0] > 0;
  }
  if (!anywhere) return;
  throw NumericError(fmt::format(
      "not writing checkpoint {}: {} holds inf or NaN, so the run diverged (an update since the last loss check "
      "overflowed or applied a non-finite gradient); the checkpoints already written are kept. Lower optimizer.lr "
      "or check the data; with fp32 or bf16, precision.check_finite = true stops at the first non-finite gradient, "
      "naming its parameter",
      checkpoint, here.empty() ? "a weight on another rank" : here));
}

}  // namespace kiln::train
