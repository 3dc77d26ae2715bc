// Which rank the others waited for, from the ranks' collective records (see collective_report.hpp).
#include "kiln/train/collective_report.hpp"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "kiln/errors.hpp"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

// Records of one attempt are written after every rank of it started recording (they met first);
// this much clock difference between hosts is tolerated.
constexpr std::int64_t kClockSlackMs = 2000;

std::string clock_text(std::int64_t ms) {
  const time_t secs = static_cast<time_t>(ms / 1000);
  struct tm local {};
  ::localtime_r(&secs, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return fmt::format("{}.{:03}", buf, ms % 1000);
}

std::string seconds_text(std::int64_t ms) {
  return ms < 1000 ? fmt::format("{} ms", ms) : fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  return fmt::format("ranks {}", fmt::join(ranks, ", "));
}

/// "all_reduce(sum) f32 x 101770 (gradients, bucket 0; training epoch 1 step 12)"
std::string describe(const CollectiveEntry& e) {
  std::vector<std::string> where;
  if (!e.purpose.empty()) where.push_back(e.purpose);
  std::string position = e.phase;
  if (e.epoch > 0) position += fmt::format("{}epoch {}", position.empty() ? "" : " ", e.epoch);
  if (e.step > 0) position += fmt::format(" step {}", e.step);
  if (!position.empty()) where.push_back(position);
  if (where.empty()) return e.signature();
  return fmt::format("{} ({})", e.signature(), fmt::join(where, "; "));
}

/// "while training, epoch 1/3 step 12/468"
std::string position_text(const RankTrace& t) {
  std::string out = t.phase.empty() ? std::string() : "while " + t.phase;
  if (t.epoch > 0) out += fmt::format("{}epoch {}/{}", out.empty() ? "" : ", ", t.epoch, t.epochs);
  if (t.step > 0) out += fmt::format(" step {}/{}", t.step, t.steps);
  return out;
}

bool ended_by_signal(const RankTrace& t) { return t.reason.rfind("received SIG", 0) == 0; }

/// The lowest sequence number this rank has not completed (issued + 1 if it completed all).
std::int64_t first_unfinished(const RankTrace& t) {
  for (const CollectiveEntry& e : t.entries) {
    if (!e.completed()) return e.seq;
  }
  return t.issued + 1;
}

/// How long the rank had waited in `e` when the record was written (or when it failed).
std::int64_t waited_ms(const RankTrace& t, const CollectiveEntry& e) {
  const std::int64_t from = e.wait_ms >= 0 ? e.wait_ms : e.issued_ms;
  const std::int64_t to = e.end_ms >= 0 ? e.end_ms : t.written_ms;
  return std::max<std::int64_t>(0, to - from);
}

std::string state_text(const RankTrace& t, const CollectiveEntry& e) {
  if (e.failed()) return fmt::format("failed after {}: {}", seconds_text(waited_ms(t, e)), e.error);
  if (e.completed()) {
    return fmt::format("completed in {}", seconds_text(std::max<std::int64_t>(0, e.end_ms - e.issued_ms)));
  }
  if (e.wait_ms >= 0) return fmt::format("waiting for {}", seconds_text(waited_ms(t, e)));
  return fmt::format("issued {} before, not yet waited for", seconds_text(t.written_ms - e.issued_ms));
}

/// The first rank (by time) that stopped for a reason of its own rather than a stop signal.
const RankTrace* first_to_fail(const TraceSet& set) {
  const RankTrace* first = nullptr;
  for (const RankTrace& t : set.traces) {
    if (ended_by_signal(t)) continue;
    if (!first || t.written_ms < first->written_ms) first = &t;
  }
  return first;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot read {}", file.string()));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// One sequence number carrying different collectives on two ranks.
struct Mismatch {
  int rank_a, rank_b;
  const CollectiveEntry *a, *b;
};

/// The lowest sequence number whose collectives differ between two records, if any.
std::optional<Mismatch> first_mismatch(const TraceSet& set) {
  std::map<std::int64_t, std::pair<int, const CollectiveEntry*>> first_seen;
  std::optional<Mismatch> found;
  for (const RankTrace& t : set.traces) {
    for (const CollectiveEntry& e : t.entries) {
      auto [it, fresh] = first_seen.try_emplace(e.seq, t.rank, &e);
      if (fresh || it->second.second->signature() == e.signature()) continue;
      if (!found || e.seq < found->a->seq) found = Mismatch{it->second.first, t.rank, it->second.second, &e};
    }
  }
  return found;
}

}  // namespace

std::string describe_entry(const CollectiveEntry& e) { return describe(e); }

TraceSet read_traces(const fs::path& dir, std::int64_t not_before_ms) {
  TraceSet set;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw IoError(fmt::format("{} does not exist: no rank wrote a record of its collectives (they are written when a "
                              "rank of a multi-rank run stops on an error, by SIGTERM/SIGINT or by a crash)",
                              dir.string()));
  }
  const std::regex name(R"(rank(\d+)\.json)");
  std::vector<RankTrace> all;
  for (const auto& item : fs::directory_iterator(dir)) {
    const std::string file = item.path().filename().string();
    std::smatch m;
    if (!item.is_regular_file() || !std::regex_match(file, m, name)) continue;
    try {
      RankTrace t = parse_rank_trace(read_file(item.path()), item.path().string());
      if (std::to_string(t.rank) != m[1].str()) {
        throw DataError(fmt::format("{} holds the record of rank {}", item.path().string(), t.rank));
      }
      all.push_back(std::move(t));
    } catch (const Error& e) {
      set.notes.push_back(fmt::format("left out: {}", e.what()));
    }
  }
  std::int64_t newest_start = not_before_ms;
  for (const RankTrace& t : all) newest_start = std::max(newest_start, t.started_ms);
  for (RankTrace& t : all) {
    if (t.written_ms + kClockSlackMs < newest_start) {
      set.notes.push_back(fmt::format("left out: rank {}'s record of {} (written {} s before the newest attempt began)",
                                      t.rank, clock_text(t.written_ms), (newest_start - t.written_ms) / 1000));
      continue;
    }
    set.traces.push_back(std::move(t));
  }
  if (set.traces.empty()) {
    std::string why = set.notes.empty() ? std::string() : "; " + fmt::format("{}", fmt::join(set.notes, "; "));
    throw IoError(fmt::format("{} holds no usable record of the ranks' collectives{}", dir.string(), why));
  }
  std::sort(set.traces.begin(), set.traces.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  for (const RankTrace& t : set.traces) set.world = std::max(set.world, t.world);
  return set;
}

std::string verdict(const TraceSet& set) {
  std::set<int> have;
  for (const RankTrace& t : set.traces) have.insert(t.rank);
  std::vector<int> missing;
  for (int r = 0; r < set.world; ++r) {
    if (!have.count(r)) missing.push_back(r);
  }
  // A crash writes a record too (from the fatal-signal handler), so a missing one points first at
  // a kill no process can answer.
  const std::string missing_text =
      missing.empty() ? ""
                      : fmt::format(" {} left no record: killed (SIGKILL, the out-of-memory killer), or ended before "
                                    "{} could write one.",
                                    ranks_text(missing), missing.size() == 1 ? "it" : "they");

  if (const auto m = first_mismatch(set)) {
    return fmt::format("collective #{} differs across ranks: rank {} issued {}, rank {} issued {}; every rank must "
                       "issue the same collectives in the same order (a rank took another branch).{}",
                       m->a->seq, m->rank_a, describe(*m->a), m->rank_b, describe(*m->b), missing_text);
  }

  // The furthest collective any rank was waiting in: its peers had to issue it before it could
  // complete, so a rank that had not is the one it waited for.
  std::int64_t ahead = 0;
  for (const RankTrace& t : set.traces) {
    if (const std::int64_t f = first_unfinished(t); f <= t.issued) ahead = std::max(ahead, f);
  }
  const RankTrace* first = first_to_fail(set);
  if (ahead == 0) {
    const RankTrace& any = set.traces.front();
    const std::string last =
        any.entries.empty() ? std::string("none") : fmt::format("#{} {}", any.issued, describe(any.entries.back()));
    const std::string cause = first ? fmt::format(" Rank {} stopped first, at {}: {}", first->rank,
                                                  clock_text(first->written_ms), first->reason)
                                    : std::string(" Every record was written on a stop signal.");
    return fmt::format("no rank was waiting in a collective: every record ends with all its collectives completed "
                       "(the last: {}).{}{}",
                       last, cause, missing_text);
  }

  std::vector<int> waiting, behind;
  const CollectiveEntry* stuck = nullptr;
  std::int64_t longest = 0;
  for (const RankTrace& t : set.traces) {
    if (const CollectiveEntry* e = t.find(ahead)) {
      waiting.push_back(t.rank);
      if (!stuck) stuck = e;
      longest = std::max(longest, waited_ms(t, *e));
    } else if (t.issued < ahead) {
      behind.push_back(t.rank);
    }
  }
  const std::string what = fmt::format("collective #{} {}", ahead, describe(*stuck));

  if (!behind.empty()) {
    std::string out = fmt::format("{} never issued {}, which {} waited in (for up to {}).", ranks_text(behind), what,
                                  ranks_text(waiting), seconds_text(longest));
    for (const int r : behind) {
      const RankTrace& t =
          *std::find_if(set.traces.begin(), set.traces.end(), [r](const RankTrace& x) { return x.rank == r; });
      const std::int64_t f = first_unfinished(t);
      if (const CollectiveEntry* own = t.find(f); own && own->failed()) {
        out += fmt::format(" Rank {}'s own #{} {} failed: {}.", r, f, own->signature(), own->error);
      } else if (own) {
        // Its collective had been issued by the ranks ahead (they went past it), so nothing
        // it waited for was missing: the rank itself was stopped or slow.
        out += fmt::format(" Rank {} was still in #{} {}, which the ranks ahead had finished: it was stopped or slow, "
                           "not waiting for a peer.",
                           r, f, own->signature());
      } else {
        out += fmt::format(" Rank {} had completed every collective it issued (the last #{}) and was working outside "
                           "them.",
                           r, t.issued);
      }
      const std::string pos = position_text(t);
      out += fmt::format(" It stopped at {}{}: {}.", clock_text(t.written_ms), pos.empty() ? "" : " " + pos, t.reason);
    }
    return out + missing_text;
  }
  if (!missing.empty()) {
    const std::string who = waiting.size() == 1 ? fmt::format("the only rank with a record, rank {},", waiting[0])
                                                : fmt::format("every rank with a record ({})", fmt::join(waiting, ", "));
    return fmt::format("{} issued {} and waited in it (for up to {});{} {} the likely cause.", who, what,
                       seconds_text(longest), missing_text, missing.size() == 1 ? "It is" : "They are");
  }
  std::vector<std::string> errors;
  for (const RankTrace& t : set.traces) {
    if (const CollectiveEntry* e = t.find(ahead); e && e->failed()) {
      errors.push_back(fmt::format("rank {}: {}", t.rank, e->error));
    }
  }
  std::string out = fmt::format("every rank issued {} and none completed it: the communicator failed or stalled under "
                                "them, or a rank was stopped inside it{}.",
                                what, errors.empty() ? "" : fmt::format(" ({})", fmt::join(errors, "; ")));
  if (first) {
    out += fmt::format(" Rank {} stopped first, at {}: {}", first->rank, clock_text(first->written_ms), first->reason);
  }
  return out;
}

std::int64_t longest_wait_ms(const TraceSet& set) {
  std::int64_t longest = 0;
  for (const RankTrace& t : set.traces) {
    for (const CollectiveEntry& e : t.entries) {
      if (!e.completed()) longest = std::max(longest, waited_ms(t, e));
    }
  }
  return longest;
}

std::vector<std::string> rank_lines(const TraceSet& set) {
  std::vector<std::string> out;
  for (const RankTrace& t : set.traces) {
    const std::string pos = position_text(t);
    std::string line = fmt::format("rank {} (pid {} on {}): {} at {}{}; {} collective{} issued", t.rank, t.pid, t.host,
                                   t.reason, clock_text(t.written_ms), pos.empty() ? "" : " " + pos, t.issued,
                                   t.issued == 1 ? "" : "s");
    const std::int64_t f = first_unfinished(t);
    if (f > 1 && t.find(f - 1)) line += fmt::format(", #{} the last completed", f - 1);
    if (const CollectiveEntry* e = t.find(f)) line += fmt::format("; #{} {}: {}", f, describe(*e), state_text(t, *e));
    out.push_back(std::move(line));
  }
  return out;
}

std::vector<std::string> entry_lines(const RankTrace& t, std::size_t n) {
  std::vector<std::string> out;
  const std::size_t from = t.entries.size() > n ? t.entries.size() - n : 0;
  for (std::size_t i = from; i < t.entries.size(); ++i) {
    const CollectiveEntry& e = t.entries[i];
    out.push_back(fmt::format("  #{:<6} {:<40} issued {}  {}", e.seq, describe(e), clock_text(e.issued_ms),
                              state_text(t, e)));
  }
  return out;
}

}  // namespace kiln::train
