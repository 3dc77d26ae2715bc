// Sharder: the pure arithmetic of who reads which sample at which step (see data_loader.hpp).
//
// Decisions: the epoch permutation is a Fisher-Yates shuffle driven by the counter-based
// derive_seed (no sequential generator state), so any rank can recompute it bit for bit; the
// swap target uses a plain modulo, whose bias (n / 2^64) is far below anything measurable for
// dataset sizes. Steps are global: every rank runs the same count whatever the policy.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kiln/data/data_loader.hpp"
#include "kiln/errors.hpp"
#include "kiln/rng.hpp"
#include "kiln/sdk/checked_size.hpp"

namespace kiln::data {
namespace {

// Separates the shuffle's random stream from the per-sample seeds derive_seed(seed, epoch, index).
constexpr std::uint64_t kShuffleStream = 0x53485546464C45ull;  // "SHUFFLE"

}  // namespace

std::string_view last_batch_name(LastBatch policy) {
  switch (policy) {
    case LastBatch::drop: return "drop";
    case LastBatch::pad: return "pad";
    case LastBatch::partial: return "partial";
  }
  return "unknown";
}

LastBatch parse_last_batch(std::string_view text, std::string_view where) {
  if (text == "drop") return LastBatch::drop;
  if (text == "pad") return LastBatch::pad;
  if (text == "partial") return LastBatch::partial;
  throw ConfigError(fmt::format(
      "{}: unknown last-batch policy \"{}\"; use \"drop\" (skip the remainder), \"pad\" (wrap "
      "around and mark padding rows) or \"partial\" (short last batch)",
      where, text));
}

Sharder::Sharder(const ShardOptions& options) : options_(options) {
  const auto& o = options_;
  if (o.batch < 1) {
    throw ConfigError(fmt::format("loader batch size is {}; it must be at least 1", o.batch));
  }
  if (o.world_size < 1) {
    throw ConfigError(fmt::format("world size is {}; it must be at least 1", o.world_size));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    throw ConfigError(fmt::format("rank {} is out of range for a world of size {} (valid: 0..{})",
                                  o.rank, o.world_size, o.world_size - 1));
  }
  if (o.count < 1) {
    throw DataError(fmt::format("the data source has {} samples; it needs at least one", o.count));
  }
  // Checked: a hostile batch would otherwise wrap the global batch (and the positions
  // batch_in_order() computes, which stay below count + global) to something small or negative.
  const char* hint = "use a batch that fits the data (loader.batch, loader.eval_batch)";
  const std::int64_t global =
      sdk::mul_or_throw(o.batch, o.world_size, "the global batch (loader batch x world size)", hint);
  (void)sdk::add_or_throw(o.count, global, "the sample positions (samples + global batch)", hint);
  if (o.last_batch == LastBatch::drop) {
    steps_ = o.count / global;
    if (steps_ == 0) {
      throw ConfigError(fmt::format(
          "last_batch = \"drop\" leaves no step: {} samples < batch {} x world size {} = {}; "
          "use a smaller batch, fewer ranks, or last_batch = \"pad\" or \"partial\"",
          o.count, o.batch, o.world_size, global));
    }
  } else {
    steps_ = (o.count + global - 1) / global;
  }
}

std::vector<std::int64_t> Sharder::epoch_order(std::int64_t epoch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(options_.count));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (options_.shuffle == Shuffle::no) return order;
  for (std::int64_t i = options_.count - 1; i > 0; --i) {
    const std::uint64_t r = derive_seed(options_.seed, static_cast<std::uint64_t>(epoch),
                                        static_cast<std::uint64_t>(i), kShuffleStream);
    const auto j = static_cast<std::int64_t>(r % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

std::int64_t Sharder::global_rows(std::int64_t step) const {
  if (step < 0 || step >= steps_) {
    throw Error(fmt::format("step {} is out of range: an epoch has {} steps", step, steps_));
  }
  const std::int64_t global = options_.batch * options_.world_size;
  if (options_.last_batch != LastBatch::partial) return global;
  return std::min(global, options_.count - step * global);
}

BatchIndices Sharder::batch(std::int64_t epoch, std::int64_t step) const {
  return batch_in_order(epoch_order(epoch), step);
}

BatchIndices Sharder::batch_in_order(const std::vector<std::int64_t>& order,
                                     std::int64_t step) const {
  const auto& o = options_;
  if (step < 0 || step >= steps_) {
    throw Error(fmt::format("step {} is out of range: an epoch has {} steps (last_batch = \"{}\")",
                            step, steps_, last_batch_name(o.last_batch)));
  }
  if (static_cast<std::int64_t>(order.size()) != o.count) {
    throw Error(fmt::format("epoch order has {} entries but the source has {} samples",
                            order.size(), o.count));
  }
  const std::int64_t global = o.batch * o.world_size;
  const std::int64_t step_begin = step * global;
  const std::int64_t first = step_begin + o.rank * o.batch;  // this rank's first position
  const std::int64_t remaining = o.count - step_begin;        // positions left from this step

  BatchIndices out;
  switch (o.last_batch) {
    case LastBatch::drop:
    case LastBatch::pad: {
      // drop never reaches past count; pad wraps (possibly several times when count < W*B).
      out.indices.resize(static_cast<std::size_t>(o.batch));
      for (std::int64_t k = 0; k < o.batch; ++k) {
        const std::int64_t p = first + k;
        out.indices[static_cast<std::size_t>(k)] = order[static_cast<std::size_t>(p % o.count)];
      }
      out.valid = std::clamp<std::int64_t>(o.count - first, 0, o.batch);
      out.global_rows = global;
      out.global_valid = std::min(global, remaining);
      break;
    }
    case LastBatch::partial: {
      const std::int64_t rows = std::clamp<std::int64_t>(o.count - first, 0, o.batch);
      if (rows > 0) out.indices.assign(order.begin() + first, order.begin() + first + rows);
      out.valid = rows;
      out.global_rows = std::min(global, remaining);
      out.global_valid = out.global_rows;
      break;
    }
  }
  return out;
}

}  // namespace kiln::data
