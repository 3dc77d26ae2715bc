// `kiln summary`'s model description (see the header).
#include "kiln/train/model_summary.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kiln/config/config.hpp"
#include "kiln/plugin/guarded.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/precision_policy.hpp"
#include "kiln/sdk_internal/log_setup.hpp"
#include "kiln/train/config_plugins.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/freeze.hpp"
#include "kiln/train/init_weights.hpp"

namespace kiln::train {
namespace {

SummaryTensor tensor_row(const std::string& name, const Tensor& t) {
  SummaryTensor row;
  row.name = name;
  row.shape = t.shape();
  row.dtype = t.dtype();
  row.values = t.numel();
  return row;
}

}  // namespace

ModelSummary summarize_model(const SummaryRequest& request) {
  RankInfo ranks;  // one process, no communicator
  ranks.source = "kiln summary";
  log::configure(ranks, log::Level::warn);

  config::Config cfg = config::Config::load(request.config, request.overrides);
  const CoreTables core = validate_core_tables(cfg);
  plugin::Registry registry(plugin::default_search_path(request.plugin_dirs));
  registry.index();  // loads only the plugins the config names
  const ConfigPlugins chosen = choose_config_plugins(cfg, registry);
  const std::optional<FreezeRequest> freeze = freeze_request(chosen.model.host);

  auto args_for = [&](const PluginChoice& c) {
    PluginArgs a;
    a.params = &c.params;
    a.ranks = ranks;
    return a;
  };
  const plugin::PluginInfo& model_info = *chosen.model.plugin.info;
  const std::shared_ptr<Backend> backend = registry.create_backend(*chosen.backend.info, args_for(chosen.backend));
  const std::shared_ptr<PrecisionPolicy> precision = plugin::guarded(
      registry.create_precision(*chosen.precision.info, args_for(chosen.precision)),
      plugin::origin_of(*chosen.precision.info));
  const std::shared_ptr<Model> model = plugin::guarded(registry.create_model(model_info, args_for(chosen.model.plugin)),
                                                       plugin::origin_of(model_info));
  precision->check_backend(*backend);

  ModelBuildContext ctx;
  ctx.backend = backend.get();
  ctx.param_dtype = precision->param_dtype();
  ctx.compute_dtype = precision->compute_dtype();
  ctx.max_batch = 1;  // the parameters do not depend on it; activations are sized by it
  ctx.seed = static_cast<std::uint64_t>(core.run.get_int("seed"));
  if (freeze) {
    ctx.frozen = [&request = *freeze](std::string_view name) { return request.matches(name); };
    ctx.frozen_bn = freeze->batch_norm;
  }
  model->build(ctx);
  // What a run's rank 0 does next with [model] init: the same checks and the same errors.
  InitReport init;
  const std::optional<InitRequest> init_req = init_request(chosen.model.host);
  if (init_req) init = load_init_weights(*read_init_weights(*init_req), *backend, *model);
  const auto init_of = [&](const std::string& name) -> std::string {
    if (!init_req) return "";
    const auto has = [&](const std::vector<std::string>& names) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    return has(init.loaded) ? "loaded" : has(init.excluded) ? "init_exclude" : "missing";
  };

  ModelSummary s;
  s.model = fmt::format("{} {}", model_info.name, model_info.version);
  s.library = model_info.library.string();
  s.input = model->input_spec();
  s.precision = fmt::format("{} {}", chosen.precision.info->name, chosen.precision.info->version);
  s.param_dtype = ctx.param_dtype;
  s.compute_dtype = ctx.compute_dtype;
  s.optimizer = core.optimizer_type;
  s.weight_decay = core.optimizer.contains("weight_decay") ? core.optimizer.get_float("weight_decay") : 0.0;
  if (init_req) s.init_file = init_req->file.string();

  const auto params = model->parameters();
  // The same checks and the same line as a run's start: a pattern that matches nothing, or
  // every parameter, is refused here too.
  FrozenParameters frozen;
  if (freeze) {
    frozen = FrozenParameters(params, *freeze, model->name());
    (void)check_frozen_buffers(model->buffers(), *freeze, model->name());
    s.freeze = frozen.describe(params);
  }
  for (const Parameter& p : params) {
    SummaryTensor row = tensor_row(p.name, p.value);
    row.trains = !frozen.contains(p);
    row.weight_decay = row.trains && !(p.flags & kParamNoWeightDecay) ? s.weight_decay : 0.0;
    row.init = init_of(p.name);
    s.parameters.push_back(std::move(row));
  }
  for (const ModelBuffer& b : model->buffers()) {
    SummaryTensor row = tensor_row(b.name, b.value);
    row.frozen_buffer = (b.flags & kBufferFrozen) != 0;
    row.init = init_of(b.name);
    s.buffers.push_back(std::move(row));
  }
  return s;
}

}  // namespace kiln::train
