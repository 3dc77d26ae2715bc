// Synchronised batch-norm ([model] sync_bn = true): the core's side of BatchNormSync (model.hpp).
//
// Without it each rank normalises with the statistics of its own shard of the batch, so the step
// differs from one rank running the global batch (and the running statistics drift apart, which
// bn_sync.hpp repairs before eval and checkpoints). With it, every training-mode BatchNorm2d sums
// its per-channel moments (forward) and gradient sums (backward) over all ranks through this
// object, which stages them through the communicator: two small all-reduces per layer and step.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/model.hpp"
#include "kiln/params.hpp"

namespace kiln::train {

class CommBatchNormSync final : public BatchNormSync {
 public:
  CommBatchNormSync(Backend& backend, Communicator& comm);

  void attach(std::string_view layer) override;
  /// Copies `values` into f64 staging in the backend's device memory, all-reduces it (sum) and
  /// copies the result back. A CommError passes through as the communicator's, not the model's.
  void all_reduce_sum(std::span<double> values) override;

  std::size_t layers() const noexcept { return layers_; }
  /// After the model's build: throws ConfigError (naming `where`, the sync_bn key) when no layer
  /// attached, since the key would then change nothing.
  void require_layers(std::string_view model, const std::string& where) const;
  /// One line for the log: "sync_bn: 20 batch-norm layers normalise with ... (2 ranks, ...)".
  std::string describe() const;

 private:
  Backend& backend_;
  Communicator& comm_;
  std::size_t layers_ = 0;
  Tensor host_, device_;  // f64 staging, grown to the longest call
};

/// [model] sync_bn: nullopt when false, else where it was set (file:line). Refuses it with
/// [loader] last_batch = "partial", under which a rank can get no rows in an epoch's last step
/// and skip the collectives the others wait in.
std::optional<std::string> sync_bn_option(const ParamMap& model_host, const ParamMap& loader);

}  // namespace kiln::train
