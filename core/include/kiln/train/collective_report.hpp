// Reads the ranks' collective records (<run_dir>/debug/rank<N>.json, collective_trace.hpp) and
// says which rank the others waited for: `kiln collectives`, and the line the `--nproc`
// supervisor prints after a failed job.
//
// The reasoning: a collective completes on a rank only once every rank has issued it, so the
// lowest sequence number that some rank has not completed is the one the job stopped in. Ranks
// that issued it waited for the ones that did not; a rank with no record at all (killed,
// crashed, stopped) is the suspect when everyone with a record issued it. Before that, every
// sequence number present in two records is compared: the same number carrying different
// collectives (op, dtype, count) is a program error, named first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/train/collective_trace.hpp"

namespace kiln::train {

struct TraceSet {
  int world = 0;                   ///< ranks in the job
  std::vector<RankTrace> traces;   ///< one per rank that wrote a record, by rank
  std::vector<std::string> notes;  ///< files left out, and why (damaged, from an earlier attempt)
};

/// Reads every rank<N>.json in `dir`. Records written before the newest attempt started (a
/// resumed run's directory keeps the old ones), or before `not_before_ms`, are left out with a
/// note, as are damaged files. Throws IoError if `dir` holds no usable record.
TraceSet read_traces(const std::filesystem::path& dir, std::int64_t not_before_ms = 0);

/// The finding, in a sentence or two.
std::string verdict(const TraceSet& set);

/// The longest any rank had waited in a collective it had not completed when it wrote its
/// record (0 if none was waiting): whether the job was hung or merely stopped mid-step.
std::int64_t longest_wait_ms(const TraceSet& set);

/// One line per rank: who, why and when it wrote, and the collective it stopped in.
std::vector<std::string> rank_lines(const TraceSet& set);

/// One collective: "all_reduce(sum) f32 x 101770 (gradients, bucket 0; training epoch 1 step 12)".
std::string describe_entry(const CollectiveEntry& e);

/// The latest `n` collectives of one rank, one line each, oldest first.
std::vector<std::string> entry_lines(const RankTrace& trace, std::size_t n);

}  // namespace kiln::train
