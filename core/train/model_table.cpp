// The [model] table split into the plugin's keys and the host's (see model_table.hpp).
#include "kiln/train/model_table.hpp"

#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "kiln/errors.hpp"

namespace kiln::train {
namespace {

constexpr kiln_param_spec_v1 kModelHostKeys[] = {
    {"init", KILN_PARAM_PATH, "\"\"", nullptr,
     "Fine-tuning: a safetensors file (PyTorch state-dict names) whose tensors replace the fresh "
     "initialisation before training; empty = start from the seed's initialisation."},
    {"init_strict", KILN_PARAM_BOOL, "true", nullptr,
     "With init: a model tensor missing from the file, or a file tensor the model lacks, is an error "
     "(false: a warning listing them)."},
    {"init_exclude", KILN_PARAM_STRING_LIST, "[]", nullptr,
     "With init: glob patterns (*, ? and [...], as fnmatch) of tensor names that keep their fresh "
     "initialisation and are neither required nor loaded, e.g. [\"fc.*\"] for a new head."},
    {"freeze", KILN_PARAM_STRING_LIST, "[]", nullptr,
     "Glob patterns (*, ? and [...], as fnmatch) of parameter names that training leaves as they are: "
     "no gradient all-reduce, no optimizer update, e.g. [\"conv1.*\", \"bn1.*\", \"layer[1-3].*\"] to train "
     "only the last stage and the head; docs/fine-tuning.md."},
    {"frozen_bn", KILN_PARAM_STRING, "\"train\"", "train|eval",
     "With freeze: how a batch-norm layer whose weight and bias are frozen runs in training. \"train\": "
     "with the batch's statistics, updating its running ones (PyTorch's requires_grad_(False) without "
     ".eval()); \"eval\": with its running statistics, which then never change (Keras's trainable = False, "
     "torchvision's FrozenBatchNorm2d); docs/fine-tuning.md."},
    {"sync_bn", KILN_PARAM_BOOL, "false", nullptr,
     "Synchronised batch-norm: training-mode batch-norm layers normalise with the statistics of the "
     "global batch (all ranks), as PyTorch's SyncBatchNorm; docs/distributed.md."},
};

bool is_host_key(std::string_view key) {
  for (const kiln_param_spec_v1& s : kModelHostKeys) {
    if (key == s.name) return true;
  }
  return false;
}

}  // namespace

std::span<const kiln_param_spec_v1> model_host_schema() { return kModelHostKeys; }

ModelTable choose_model(config::Config& cfg, const plugin::Registry& registry) {
  const std::string type = cfg.plugin_type("model");
  ModelTable t;
  t.plugin.table = "model";
  t.plugin.info = &registry.require(KILN_KIND_MODEL, type, "model", cfg.where("model.type"));
  std::vector<kiln_param_spec_v1> schema;
  for (const kiln_param_spec_v1& s : t.plugin.info->params) {
    if (is_host_key(s.name)) {
      throw PluginError(fmt::format("model plugin '{}' declares a parameter '{}', but the host handles that key of "
                                    "[model] itself (fine-tuning, docs/fine-tuning.md); rename the plugin's parameter",
                                    type, s.name));
    }
    schema.push_back(s);
  }
  schema.insert(schema.end(), std::begin(kModelHostKeys), std::end(kModelHostKeys));
  const ParamMap all = cfg.validate("model", schema);
  t.plugin.params = ParamMap("model");
  t.host = ParamMap("model");
  for (const auto& [key, param] : all.entries()) {
    (is_host_key(key) ? t.host : t.plugin.params).set(key, param.value, param.origin);
  }
  return t;
}

}  // namespace kiln::train
