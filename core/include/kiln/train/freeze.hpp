// Freezing parameters ([model] freeze): glob patterns of parameter names whose values training
// leaves as they are, as `requires_grad_(False)` in PyTorch or `trainable = False` in Keras. The
// usual use is fine-tuning: load a backbone with [model] init, freeze it, train a new head.
//
// What a frozen parameter does not take part in (every rank decides the same from the config):
//   - the gradient all-reduce: GradSync plans its buckets over the trainable parameters only,
//     so a frozen backbone costs no communication;
//   - the optimizer: no update, no weight decay, no momentum or Adam state (a checkpoint holds
//     optimizer state for the trainable parameters only, as PyTorch's optimizer over them would);
//   - the precision policy's finite check and fp16 unscaling, and gradient clipping's norm: the
//     trainer zeroes the frozen gradients after backward, before any of them look, so only the
//     trainable ones count, as in PyTorch where a frozen parameter has no gradient at all.
// The backward work: the trainer gives the model the patterns (ModelBuildContext::frozen). A
// model that reads them (Kiln's, through the SDK layers) skips frozen weight gradients and stops
// back-propagating where no parameter before a layer trains, as PyTorch's autograd does; one that
// does not computes every gradient, which costs time but changes nothing. The log line says which.
// What a frozen parameter still takes part in: forward, the broadcast of the initial values,
// checkpoints and init. Batch-norm layers whose weight and bias are frozen keep updating their
// running statistics in training mode, as PyTorch's do without `.eval()`, unless [model]
// frozen_bn = "eval": they then normalise with their running statistics and never change them
// (Keras's trainable = False; ModelBuildContext::frozen_bn). That changes what training computes,
// so the model must honour it: it marks those statistics kBufferFrozen, and a model that marks
// none is refused (check_frozen_buffers).
//
// Patterns use fnmatch (*, ?, [...]) against parameter names (PyTorch state-dict names:
// "layer1.0.conv1.weight"). A pattern that matches no parameter is an error (a typo, or a
// buffer's name), and so is freezing every parameter (nothing would train). The patterns are
// part of the run identity: a resume must freeze the same parameters.
#pragma once

#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/model.hpp"
#include "kiln/params.hpp"

namespace kiln::train {

/// What [model] freeze asks for.
struct FreezeRequest {
  std::vector<std::string> patterns;  ///< fnmatch globs, none empty
  std::string where;                  ///< "model.freeze (run.toml:7)", for messages
  /// [model] frozen_bn: how batch-norm layers with a frozen weight and bias run in training.
  Mode batch_norm = Mode::train;
  std::string batch_norm_where;       ///< "model.frozen_bn (run.toml:8)"

  /// Whether some pattern matches `parameter`; ModelBuildContext::frozen.
  bool matches(std::string_view parameter) const;
};

/// The request in [model]'s host keys (model_table.hpp), or nullopt when freeze is empty.
/// Throws ConfigError for an empty pattern, and for frozen_bn = "eval" without freeze.
std::optional<FreezeRequest> freeze_request(const ParamMap& model_host);

/// After the build, what the model did with request.batch_norm (ModelBuildContext::frozen_bn):
/// the log line under "eval" ("frozen_bn = \"eval\": 40 of 40 running statistics (model
/// buffers) stay as they are; ..."), nullopt under "train". Throws ConfigError under "eval" when
/// `buffers` has no kBufferFrozen one (the model has no batch-norm layer that the patterns
/// freeze whole, or ignores frozen_bn), and PluginError under "train" when it has one.
std::optional<std::string> check_frozen_buffers(std::span<const ModelBuffer> buffers, const FreezeRequest& request,
                                                std::string_view model);

/// Which parameters of a built model a request freezes.
class FrozenParameters {
 public:
  /// No parameter frozen.
  FrozenParameters() = default;
  /// Matches `request` against `params` (Model::parameters()) of `model`. Throws ConfigError
  /// naming the key when a pattern matches no parameter, or when every parameter would be frozen,
  /// and PluginError when the model marks a parameter kParamFrozen that the patterns do not name
  /// (its gradient might be missing, and the run would train it on garbage).
  FrozenParameters(std::span<const Parameter> params, const FreezeRequest& request, std::string_view model);

  bool empty() const noexcept { return names_.empty(); }
  bool contains(const Parameter& p) const { return names_.count(p.name) > 0; }
  const std::set<std::string>& names() const noexcept { return names_; }

  /// 1-D views covering the frozen parameters' gradients (one per run of consecutive frozen
  /// parameters in one arena), for the trainer to zero after backward.
  std::vector<Tensor> grad_views(std::span<const Parameter> params) const;

  /// One line for the log: "freeze: 159 of 161 tensors (23508032 of 25557032 values) by
  /// model.freeze (run.toml:7); trainable: fc.weight, fc.bias; resnet skips their backward
  /// work" (or says that the model computes their gradients anyway).
  std::string describe(std::span<const Parameter> params) const;

 private:
  std::set<std::string> names_;
  std::string where_;
  std::string model_;
};

}  // namespace kiln::train
