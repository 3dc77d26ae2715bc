// A rank's facts for the agreement check (see the header and rank_agreement.hpp).
#include "kiln/train/run_facts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <span>

#include "kiln/plugin/build_id.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/rng.hpp"
#include "kiln/sdk/half.hpp"
#include "kiln/sdk_internal/fingerprint.hpp"
#include "kiln/train/class_names.hpp"
#include "kiln/train/model_table.hpp"
#include "kiln/train/run_identity.hpp"
#include "kiln/version.hpp"

namespace kiln::train {
namespace {

constexpr std::int64_t kDigestSamples = 8;
constexpr std::uint64_t kDigestStream = 0xA6EE;  // seeds of the digest's reads, apart from training's

/// Keys that choose how a node runs, not what it computes, and may differ between ranks.
const std::set<std::string>& local_keys() {
  static const std::set<std::string> keys = {"loader.workers", "loader.prefetch"};
  return keys;
}

void add_table(std::map<std::string, std::string>& out, const std::string& prefix, const ParamMap& table,
               const std::set<std::string>& left_out = {}) {
  RunIdentity entries;
  add_params(entries, prefix, table);
  for (auto& [k, v] : entries) {
    if (!local_keys().count(k) && !left_out.count(k)) out[k] = std::move(v);
  }
}

/// The keys of a plugin's table (or of the core's part of [model]) that are not compared as
/// config values:
///   - every key of [backend]: threads, devices and algorithms choose how a node computes, not
///     what (its type is compared);
///   - keys of type path (mnist's `path`, imagenet's `root`, `model.init`): each node may keep its
///     copy of a file elsewhere. What the file holds is compared or not needed instead: a data
///     split's samples and class names below; `model.init` is read by rank 0 alone, whose weights
///     every rank receives before the first step (param_sync.hpp);
///   - a data table's `class_names`: compared below, under the same key, as a summary of what the
///     split reports (a list of 1,000 names would fill the message).
std::set<std::string> keys_not_compared(const std::string& table, const ParamMap& params,
                                        std::span<const kiln_param_spec_v1> schema) {
  std::set<std::string> out;
  for (const auto& entry : params.entries()) {
    const std::string& key = entry.first;  // not a structured binding: clang before 16 cannot capture one
    const auto spec = std::find_if(schema.begin(), schema.end(),
                                   [&](const kiln_param_spec_v1& s) { return s.name && key == s.name; });
    const bool is_path = spec != schema.end() && spec->type == KILN_PARAM_PATH;
    const bool is_data = table.rfind("data.", 0) == 0;
    if (table == "backend" || is_path || (is_data && key == "class_names")) out.insert(table + "." + key);
  }
  return out;
}

double value_at(const unsigned char* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::f32: { float v; std::memcpy(&v, data + 4 * i, 4); return v; }
    case DType::f64: { double v; std::memcpy(&v, data + 8 * i, 8); return v; }
    case DType::f16: { std::uint16_t v; std::memcpy(&v, data + 2 * i, 2); return sdk::f16_to_f32(v); }
    case DType::bf16: { std::uint16_t v; std::memcpy(&v, data + 2 * i, 2); return sdk::bf16_to_f32(v); }
    case DType::i32: { std::int32_t v; std::memcpy(&v, data + 4 * i, 4); return v; }
    case DType::i64: { std::int64_t v; std::memcpy(&v, data + 8 * i, 8); return static_cast<double>(v); }
    case DType::u8: return data[i];
  }
  return 0;
}

}  // namespace

std::vector<double> sample_digest(const DataSource& source, const DatasetInfo& info, std::uint64_t seed) {
  const std::int64_t n = std::min(kDigestSamples, info.count);
  const std::size_t elements = static_cast<std::size_t>(shape_numel(info.sample_shape));
  std::vector<unsigned char> sample(shape_bytes(info.sample_shape, info.sample_dtype));
  std::vector<double> out;
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t index = n == 1 ? 0 : k * (info.count - 1) / (n - 1);
    std::int32_t label = 0;
    source.read(index, derive_seed(seed, kDigestStream, static_cast<std::uint64_t>(index)),
                SampleSlot{sample.data(), sample.size(), &label});
    double sum = 0, magnitude = 0, weighted = 0;
    for (std::size_t i = 0; i < elements; ++i) {
      const double v = value_at(sample.data(), info.sample_dtype, i);
      sum += v;
      magnitude += std::abs(v);
      weighted += v * static_cast<double>(1 + i % 7);
    }
    out.insert(out.end(), {static_cast<double>(label), sum, magnitude, weighted});
  }
  return out;
}

RankFacts run_facts(const RunFactsInput& in) {
  RankFacts facts;
  auto& must = facts.must_match;
  must["kiln"] = fmt::format("{} (contract {})", kVersion, sdk::host_contract_fingerprint());
  facts.should_match["the core library"] = plugin::core_build_id();
  const CoreTables& c = *in.core;
  for (const auto& [name, table] : {std::pair<const char*, const ParamMap*>{"run", &c.run}, {"loader", &c.loader},
                                    {"loss", &c.loss}, {"dist", &c.dist}, {"checkpoint", &c.checkpoint},
                                    {"early_stop", &c.early_stop}, {"optimizer", &c.optimizer},
                                    {"schedule", &c.schedule}, {"ema", &c.ema}}) {
    add_table(must, name, *table);
  }
  must["optimizer.type"] = "\"" + c.optimizer_type + "\"";
  must["schedule.type"] = "\"" + c.schedule_type + "\"";
  if (in.model_host) {
    add_table(must, "model", *in.model_host, keys_not_compared("model", *in.model_host, model_host_schema()));
  }
  for (const auto& [k, v] : in.command) must[k] = v;
  for (const PluginChoice* p : in.plugins) {
    const auto& info = *p->info;
    must[p->table + ".type"] = fmt::format("{} {}", info.name, info.version);
    add_table(must, p->table, p->params, keys_not_compared(p->table, p->params, info.params));
    facts.should_match[fmt::format("{} plugin '{}' ({})", plugin::kind_name(info.kind), info.name,
                                   info.library.filename().string())] = plugin::build_id_of(info.library);
  }
  for (const DataSplit& d : in.data) {
    must[d.table + ".samples"] = fmt::format("{} of {} {}, {} classes", d.info.count, dtype_name(d.info.sample_dtype),
                                             shape_string(d.info.sample_shape), d.info.num_classes);
    must[d.table + ".class_names"] = class_names_summary(d.info.class_names);
    facts.close[fmt::format("{}'s samples", d.table)] = sample_digest(*d.source, d.info, in.seed);
  }
  return facts;
}

}  // namespace kiln::train
