// The plugin tables of a training config (see the header).
#include "kiln/train/config_plugins.hpp"

namespace kiln::train {

ConfigPlugins choose_config_plugins(config::Config& cfg, const plugin::Registry& registry) {
  // In the order of a config file's usual tables, so the first mistake named is the first a
  // reader meets.
  PluginChoice backend = choose(cfg, registry, KILN_KIND_BACKEND, "backend", "cpu");
  ModelTable model = choose_model(cfg, registry);
  PluginChoice train = choose(cfg, registry, KILN_KIND_DATA, "data.train", nullptr);
  std::optional<PluginChoice> eval;
  if (cfg.has_table("data.eval")) eval = choose(cfg, registry, KILN_KIND_DATA, "data.eval", nullptr);
  PluginChoice comm = choose(cfg, registry, KILN_KIND_COMMUNICATOR, "comm", "local");
  PluginChoice precision = choose(cfg, registry, KILN_KIND_PRECISION, "precision", "fp32");
  cfg.check_all_consumed();
  return ConfigPlugins{std::move(backend), std::move(model),     std::move(train),
                       std::move(eval),    std::move(comm),      std::move(precision)};
}

}  // namespace kiln::train
