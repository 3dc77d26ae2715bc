// Pieces of wiring a run from its config that `kiln train` (run.cpp) and `kiln eval` /
// `kiln predict` (eval_session.cpp) share, so a finished run is rebuilt by the same rules it was
// built with: which plugin a table names and its validated parameters, whether a data source
// fits the model, whether a loader's staging buffers fit in 64 bits, and the loader options.
// Every check throws ConfigError with a one-line message naming the table or key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/config/config.hpp"
#include "kiln/data/data_loader.hpp"
#include "kiln/data_source.hpp"
#include "kiln/model.hpp"
#include "kiln/plugin/registry.hpp"

namespace kiln::train {

/// A plugin table after validation: which plugin, and its parameters.
struct PluginChoice {
  std::string table;
  const plugin::PluginInfo* info = nullptr;
  ParamMap params;
};

/// Picks the plugin `table`'s type names (or `default_type` when the table or its type is
/// missing; nullptr: required) and validates the table against that plugin's schema.
PluginChoice choose(config::Config& cfg, const plugin::Registry& registry, std::uint32_t kind,
                    const std::string& table, const char* default_type);

/// The loader stages `prefetch + 1` buffers of batch x sample bytes; checked naming `key`, so a
/// huge batch is a config error before any allocation rather than a product that wraps.
void check_batch_bytes(const ParamMap& loader, const char* key, std::int64_t batch, const DatasetInfo& data,
                       const std::string& table);

/// Accepts a data source whose samples the model can take: same dtype and element count (a
/// model with a 1-D input takes any sample shape of that size, flattened), no more classes; and
/// class names that keep the contract (class_names.hpp; a DataError names `source`, the plugin).
void check_model_data(const InputSpec& spec, const DatasetInfo& data, const std::string& table,
                      std::string_view source);

/// Refuses a source without labels (DatasetInfo::labeled) where `command` ("kiln train", "kiln
/// eval") needs them, naming the table and plugin and pointing at `kiln predict`.
void require_labels(const DatasetInfo& data, const std::string& table, std::string_view source,
                    std::string_view command);

/// Refuses an eval split that numbers its classes differently from the train split (both named:
/// class_names.hpp says why), before anything is written.
void check_same_classes(const DatasetInfo& train, const DatasetInfo& eval);

/// Loader options from the [loader] table; `policy_key` names its last-batch policy key.
data::LoaderOptions loader_options(const ParamMap& loader, const RankInfo& ranks, std::int64_t count,
                                   std::int64_t batch, const char* policy_key, data::Shuffle shuffle,
                                   std::uint64_t seed);

}  // namespace kiln::train
