// A rank's record of its latest collectives, as written to <run_dir>/debug/rank<N>.json when
// the rank stops abnormally, and read back by `kiln collectives` (collective_report.hpp).
//
// PyTorch calls this a flight recorder: when a job hangs or a rank fails, every surviving rank
// says which collectives it issued, which completed and which it was still waiting in, so the
// rank that never arrived can be named by comparing the records instead of guessing from one
// rank's timeout message. Times are wall-clock milliseconds since the Unix epoch, comparable
// across the ranks of a host (and across hosts whose clocks are synchronised).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/io/text_out.hpp"

namespace kiln::train {

/// One collective as this rank saw it.
struct CollectiveEntry {
  std::int64_t seq = 0;  ///< 1-based, in the order this rank issued them
  std::string op;        ///< "all_reduce(sum)", "broadcast(root 0)", "all_gather", "barrier"
  std::string dtype;     ///< "f32"; empty for a barrier
  std::int64_t count = 0;
  std::string purpose;  ///< "gradients, bucket 3" (collective_purpose.hpp); may be empty
  std::string phase;    ///< the run's phase when issued ("training"); may be empty
  std::int64_t epoch = 0, step = 0;  ///< 1-based; 0: not inside an epoch / between steps
  std::int64_t issued_ms = 0;
  std::int64_t wait_ms = -1;  ///< when this rank began to wait for it; -1: it had not
  std::int64_t end_ms = -1;   ///< when it completed or failed; -1: it had not
  std::string error;          ///< why it failed; empty if it did not

  bool completed() const { return end_ms >= 0 && error.empty(); }
  bool failed() const { return !error.empty(); }
  /// "all_reduce(sum) f32 x 101770"; two ranks' collectives match when these are equal.
  std::string signature() const;
};

/// Everything one rank wrote.
struct RankTrace {
  int rank = 0, world = 1;
  std::string host;
  std::int64_t pid = 0;
  std::string communicator;  ///< the plugin's describe() line
  std::string reason;        ///< why it was written: the error that ended the run, or "SIGTERM"
  std::string phase;         ///< the run's phase when written
  std::int64_t epoch = 0, epochs = 0, step = 0, steps = 0;
  std::int64_t started_ms = 0;  ///< when this rank's recording began (before it met the others)
  std::int64_t written_ms = 0;
  std::int64_t issued = 0;  ///< collectives issued in all; entries holds the latest of them
  std::vector<CollectiveEntry> entries;  ///< oldest first

  /// The entry for `seq`, or null if it is not among the entries kept.
  const CollectiveEntry* find(std::int64_t seq) const;
};

/// The file's contents (one JSON object, a format of Kiln's own, documented in distributed.md).
std::string to_json(const RankTrace& trace);

/// The same document written in parts into `out` without allocating (async-signal-safe with an
/// io::BufferOut): the head, each entry (oldest first), the end. to_json() writes through these
/// too, so a record written by the fatal-signal handler (collective_recorder.hpp) has the same
/// format. The views must stay valid for the call.
struct TraceHeadView {
  int rank = 0, world = 1;
  std::string_view host;
  std::int64_t pid = 0;
  std::string_view communicator, reason, phase;
  std::int64_t epoch = 0, epochs = 0, step = 0, steps = 0, started_ms = 0, written_ms = 0, issued = 0;
};
struct EntryView {
  std::int64_t seq = 0;
  std::string_view op, dtype;
  std::int64_t count = 0;
  std::string_view purpose, phase;
  std::int64_t epoch = 0, step = 0, issued_ms = 0, wait_ms = -1, end_ms = -1;
  std::string_view error;
};
void write_trace_head(io::TextOut& out, const TraceHeadView& head);
void write_trace_entry(io::TextOut& out, const EntryView& entry, bool first);
void write_trace_end(io::TextOut& out);
/// Parses to_json()'s output; a malformed or incomplete document is a DataError naming `what`.
RankTrace parse_rank_trace(std::string_view json, const std::string& what);

}  // namespace kiln::train
