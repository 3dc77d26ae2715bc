// Grouping loader steps into accumulation groups (see the header).
#include "kiln/train/accumulation.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kiln/errors.hpp"

namespace kiln::train {

AccumulationPlan::AccumulationPlan(const data::ShardOptions& shard, std::int64_t accumulate_steps)
    : sharder_(shard), n_(accumulate_steps) {
  if (n_ < 1) throw ConfigError(fmt::format("accumulate_steps = {} must be at least 1", n_));
}

std::int64_t AccumulationPlan::updates_per_epoch() const noexcept {
  return (sharder_.steps_per_epoch() + n_ - 1) / n_;
}

std::int64_t AccumulationPlan::loader_steps_after(std::int64_t updates) const noexcept {
  return std::min(updates * n_, sharder_.steps_per_epoch());
}

MicroStep AccumulationPlan::at(std::int64_t step) const {
  const std::int64_t steps = sharder_.steps_per_epoch();
  if (step < 0 || step >= steps) {
    throw Error(fmt::format("loader step {} is out of range: an epoch has {} steps", step, steps));
  }
  MicroStep m;
  m.group = step / n_;
  const std::int64_t begin = m.group * n_, end = std::min(begin + n_, steps);
  m.first = step == begin;
  m.last = step + 1 == end;
  for (std::int64_t s = begin; s < end; ++s) m.group_rows += sharder_.global_rows(s);
  return m;
}

}  // namespace kiln::train
