// The core's side of synchronised batch-norm (see sync_batch_norm.hpp).
#include "kiln/train/sync_batch_norm.hpp"
#include "kiln/train/collective_purpose.hpp"

#include <fmt/format.h>

#include <cstring>

#include "kiln/errors.hpp"
#include "kiln/plugin/plugin_call.hpp"

namespace kiln::train {

CommBatchNormSync::CommBatchNormSync(Backend& backend, Communicator& comm) : backend_(backend), comm_(comm) {}

void CommBatchNormSync::attach(std::string_view) { ++layers_; }

void CommBatchNormSync::all_reduce_sum(std::span<double> values) {
  // Called by the model's layers from inside forward()/backward(): a failure here is the
  // communicator's or the backend's (already located), not the model plugin's.
  try {
    const auto n = static_cast<std::int64_t>(values.size());
    if (!host_.defined() || host_.numel() < n) {
      host_ = backend_.allocate({n}, DType::f64, MemoryKind::host);
      device_ = backend_.allocate({n}, DType::f64, MemoryKind::device);
    }
    const Tensor host = host_.view(0, {n}), device = device_.view(0, {n});
    std::memcpy(host.data(), values.data(), values.size_bytes());
    backend_.copy(host, device);
    const CollectivePurpose purpose("sync_bn batch statistics");
    comm_.all_reduce(device, ReduceOp::sum)->wait();
    backend_.copy(device, host);  // complete when it returns (into host memory)
    std::memcpy(values.data(), host.data(), values.size_bytes());
  } catch (...) {
    plugin::rethrow_past_plugin();
  }
}

void CommBatchNormSync::require_layers(std::string_view model, const std::string& where) const {
  if (layers_ == 0) {
    throw ConfigError(fmt::format("{}: sync_bn = true, but model '{}' has no batch-norm layer that synchronises "
                                  "(those that frozen_bn = \"eval\" keeps use no batch statistics); remove the key "
                                  "(or set it to false)",
                                  where, model));
  }
}

std::string CommBatchNormSync::describe() const {
  return fmt::format("sync_bn: {} batch-norm layer{} normalise with the statistics of the global batch ({} rank{}, "
                     "two f64 all-reduces per layer and step)",
                     layers_, layers_ == 1 ? "" : "s", comm_.size(), comm_.size() == 1 ? "" : "s");
}

std::optional<std::string> sync_bn_option(const ParamMap& model_host, const ParamMap& loader) {
  if (!model_host.get_bool("sync_bn")) return std::nullopt;
  const std::string where = model_host.where("sync_bn");
  if (loader.get_string("last_batch") == "partial") {
    throw ConfigError(fmt::format("{}: sync_bn = true cannot be combined with last_batch = \"partial\" ({}): a rank "
                                  "can get no rows in an epoch's last step and would skip the batch-norm all-reduces "
                                  "the other ranks wait in; use \"drop\" or \"pad\"",
                                  where, loader.where("last_batch")));
  }
  return where;
}

}  // namespace kiln::train
