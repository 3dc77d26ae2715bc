// What one rank runs, as the facts the ranks compare before training (rank_agreement.hpp says
// which differences stop the run and why).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/data_source.hpp"
#include "kiln/params.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/rank_agreement.hpp"
#include "kiln/train/wiring.hpp"

namespace kiln::train {

struct DataSplit {
  std::string table;  ///< "data.train"
  const DataSource* source = nullptr;
  DatasetInfo info;
};

struct RunFactsInput {
  const CoreTables* core = nullptr;
  std::vector<const PluginChoice*> plugins;  ///< every plugin the run loaded
  const ParamMap* model_host = nullptr;      ///< the core's keys of [model] (init, freeze, ...)
  std::vector<DataSplit> data;
  std::uint64_t seed = 0;
  /// What the command line decides for every rank: "--check-sharding" (a collective), the
  /// checkpoint "--resume" continues (its optimizer state is each rank's own), "--dry-run".
  std::map<std::string, std::string> command;
};

/// This rank's facts. Reads a few samples of each split (sample_digest).
RankFacts run_facts(const RunFactsInput& in);

/// A digest of up to 8 samples spread over `info.count`, read with seeds derived from `seed`:
/// per sample its label, the sum of its values, the sum of their magnitudes and a sum weighted by
/// position (so a flipped or shifted image differs). Throws what the source's read() throws.
std::vector<double> sample_digest(const DataSource& source, const DatasetInfo& info, std::uint64_t seed);

}  // namespace kiln::train
