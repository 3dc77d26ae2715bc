// Shared wiring of a run from its config (see wiring.hpp); moved here from run.cpp unchanged.
#include "kiln/train/wiring.hpp"

#include <fmt/format.h>

#include <string_view>

#include "kiln/errors.hpp"
#include "kiln/sdk/checked_size.hpp"
#include "kiln/train/class_names.hpp"

namespace kiln::train {

PluginChoice choose(config::Config& cfg, const plugin::Registry& registry, std::uint32_t kind,
                    const std::string& table, const char* default_type) {
  const std::string type = default_type ? cfg.plugin_type(table, default_type) : cfg.plugin_type(table);
  PluginChoice c;
  c.table = table;
  c.info = &registry.require(kind, type, table, cfg.where(table + ".type"));
  c.params = cfg.validate(table, c.info->params);
  return c;
}

void check_batch_bytes(const ParamMap& loader, const char* key, std::int64_t batch, const DatasetInfo& data,
                       const std::string& table) {
  const std::string what = fmt::format("{} x one {} sample {}{}", loader.where(key), table,
                                       dtype_name(data.sample_dtype), shape_string(data.sample_shape));
  const char* hint = "use a batch that fits in memory";
  const std::int64_t elems = sdk::mul_or_throw(batch, shape_numel(data.sample_shape), what, hint);
  const auto bytes = sdk::checked_bytes(sdk::mul_or_throw(elems, loader.get_int("prefetch") + 1, what, hint),
                                        dtype_size(data.sample_dtype));
  if (!bytes) throw ConfigError(fmt::format("{} needs more bytes than fit in 64 bits; {}", what, hint));
}

void check_model_data(const InputSpec& spec, const DatasetInfo& data, const std::string& table,
                      std::string_view source) {
  const bool same_shape = spec.sample_shape == data.sample_shape;
  const bool flattenable = spec.sample_shape.size() == 1 && shape_numel(spec.sample_shape) == shape_numel(data.sample_shape);
  if (spec.dtype != data.sample_dtype || !(same_shape || flattenable)) {
    throw ConfigError(fmt::format("the model expects samples of {} {}, but [{}] produces {} {}", dtype_name(spec.dtype),
                                  shape_string(spec.sample_shape), table, dtype_name(data.sample_dtype),
                                  shape_string(data.sample_shape)));
  }
  if (data.num_classes > spec.num_classes) {
    throw ConfigError(fmt::format("[{}] has {} classes but the model outputs only {}; set model.num_classes",
                                  table, data.num_classes, spec.num_classes));
  }
  check_class_names(data, source, table);
}

void require_labels(const DatasetInfo& data, const std::string& table, std::string_view source,
                    std::string_view command) {
  if (data.labeled) return;
  throw ConfigError(fmt::format("[{}] ({}: {}) has no labels, and {} scores predictions against labels; "
                                "kiln predict writes a model's predictions for unlabeled samples",
                                table, source, data.description, command));
}

void check_same_classes(const DatasetInfo& train, const DatasetInfo& eval) {
  if (const auto conflict = class_names_conflict(train.class_names, "[data.train]", eval.class_names, "[data.eval]")) {
    throw ConfigError(fmt::format("the eval split's classes differ from the train split's: {}; its labels would be "
                                  "scored against the wrong outputs. Give both splits the same classes in the same "
                                  "order (an ImageFolder split needs the same class directories)",
                                  *conflict));
  }
}

data::LoaderOptions loader_options(const ParamMap& loader, const RankInfo& ranks, std::int64_t count,
                                   std::int64_t batch, const char* policy_key, data::Shuffle shuffle,
                                   std::uint64_t seed) {
  data::LoaderOptions o;
  o.shard.count = count;
  o.shard.batch = batch;
  o.shard.rank = ranks.rank;
  o.shard.world_size = ranks.world_size;
  o.shard.last_batch = data::parse_last_batch(loader.get_string(policy_key), loader.where(policy_key));
  // The Sharder refuses this too, but knows no keys: say which split, policy and batch it is.
  if (o.shard.last_batch == data::LastBatch::drop && ranks.world_size > 0 && batch > count / ranks.world_size) {
    const bool eval = std::string_view(policy_key) == "eval_last_batch";
    const char* batch_key = eval && loader.get_int("eval_batch") > 0 ? "eval_batch" : "batch";
    throw ConfigError(fmt::format(
        "{} = \"drop\" leaves no step: [data.{}] has {} samples, fewer than one global batch ({} {} x world size "
        "{}); use a smaller {}, fewer ranks, or {} = \"pad\" or \"partial\"",
        loader.where(policy_key), eval ? "eval" : "train", count, loader.where(batch_key), batch, ranks.world_size,
        batch_key, policy_key));
  }
  o.shard.shuffle = shuffle;
  o.shard.seed = seed;
  o.workers = static_cast<int>(loader.get_int("workers"));
  o.prefetch = static_cast<int>(loader.get_int("prefetch"));
  if (o.workers < 1) throw ConfigError(loader.where("workers") + " must be at least 1");
  if (o.prefetch < 1) throw ConfigError(loader.where("prefetch") + " must be at least 1");
  return o;
}

}  // namespace kiln::train
