// The [model] table: the model plugin's own keys plus keys the host handles itself.
//
// The host owns the fine-tuning keys (init, init_strict, init_exclude: init_weights.hpp says what
// they do; freeze and frozen_bn: freeze.hpp) and sync_bn (sync_batch_norm.hpp). They are validated together
// with the plugin's schema, so an unknown key's "valid keys" list and the resolved config.toml
// show both, and then split off: the plugin's factory never sees them. The run identity is
// computed from the plugin's keys, plus freeze, frozen_bn and sync_bn, which change what training computes
// (where a run's first weights came from does not matter to a resume). A model plugin that
// declares a key of the same name is refused, naming the plugin and the key.
#pragma once

#include <span>

#include "kiln/config/config.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/wiring.hpp"

namespace kiln::train {

/// The host's keys of [model]: init (path, "" = none), init_strict (true), init_exclude ([]),
/// freeze ([]), frozen_bn ("train"), sync_bn (false).
std::span<const kiln_param_spec_v1> model_host_schema();

struct ModelTable {
  PluginChoice plugin;  ///< the model plugin and its own validated keys (what its factory gets)
  ParamMap host;        ///< the host's keys of the same table, validated, defaults filled in
};

/// Picks the model plugin [model] names and validates the table against its schema plus
/// model_host_schema(). Throws ConfigError (file:line) like choose().
ModelTable choose_model(config::Config& cfg, const plugin::Registry& registry);

}  // namespace kiln::train
