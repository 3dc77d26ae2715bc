// The ranks' agreement check (see the header).
//
// Wire format of one rank's facts: a sequence of records "<kind><key length>:<key><value
// length>:<value>", kind '=' (must match), '~' (close: numbers joined by ','), '?' (should
// match). Lengths keep any byte in a value (a config string may hold a NUL escape).
#include "kiln/train/rank_agreement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "kiln/dist/stores.hpp"
#include "kiln/errors.hpp"

namespace kiln::train {
namespace {

constexpr int kRanksNamed = 4;      // ranks listed in the verdict; the rest are counted
constexpr int kDiffsPerRank = 3;    // differences listed per rank; the rest are counted
constexpr double kTolerance = 1e-5;  // relative, of a sample's summed magnitudes

void put(std::string& out, char kind, const std::string& key, const std::string& value) {
  out += kind;
  out += std::to_string(key.size()) + ":" + key;
  out += std::to_string(value.size()) + ":" + value;
}

std::string numbers_text(const std::vector<double>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.17g}", i ? "," : "", v[i]);
  return out;
}

class Reader {
 public:
  Reader(const std::vector<std::uint8_t>& bytes, const std::string& from)
      : text_(bytes.begin(), bytes.end()), from_(from) {}
  bool done() const { return at_ >= text_.size(); }
  char kind() { return text_[at_++]; }
  std::string field() {
    const std::size_t colon = text_.find(':', at_);
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text_.data() + at_, text_.data() + std::min(colon, text_.size()), n);
    if (colon == std::string::npos || ec != std::errc() || end != text_.data() + colon || n > text_.size() - colon - 1) {
      fail();
    }
    std::string out = text_.substr(colon + 1, n);
    at_ = colon + 1 + n;
    return out;
  }
  [[noreturn]] void fail() const {
    throw CommError(fmt::format("{} in the rendezvous store are damaged at byte {} (another program may share the "
                                "store's keys)",
                                from_, at_));
  }

 private:
  std::string text_;
  std::string from_;
  std::size_t at_ = 0;
};

std::vector<double> parse_numbers(const std::string& text, const Reader& reader) {
  std::vector<double> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + comma, v);
    if (ec != std::errc() || end != text.data() + comma) reader.fail();
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

/// "key = value where rank 0 has other", with "nothing" for a side that lacks the key.
std::string differ_text(const std::string& key, const std::string* theirs, const std::string* ours) {
  if (!theirs) return fmt::format("no {} where rank 0 has {}", key, *ours);
  if (!ours) return fmt::format("{} = {} where rank 0 has none", key, *theirs);
  return fmt::format("{} = {} where rank 0 has {}", key, *theirs, *ours);
}

template <class Map, class Same, class Say>
void compare_maps(const Map& ours, const Map& theirs, Same same, Say say, std::vector<std::string>& out) {
  std::set<std::string> keys;
  for (const auto& [k, v] : ours) keys.insert(k);
  for (const auto& [k, v] : theirs) keys.insert(k);
  for (const auto& k : keys) {
    const auto a = ours.find(k), b = theirs.find(k);
    const auto* mine = a == ours.end() ? nullptr : &a->second;
    const auto* other = b == theirs.end() ? nullptr : &b->second;
    if (mine && other && same(*mine, *other)) continue;
    out.push_back(say(k, other, mine));
  }
}

}  // namespace

std::vector<std::uint8_t> encode(const RankFacts& facts) {
  std::string out;
  for (const auto& [k, v] : facts.must_match) put(out, '=', k, v);
  for (const auto& [k, v] : facts.close) put(out, '~', k, numbers_text(v));
  for (const auto& [k, v] : facts.should_match) put(out, '?', k, v);
  return {out.begin(), out.end()};
}

RankFacts decode(const std::vector<std::uint8_t>& bytes, const std::string& from) {
  RankFacts facts;
  Reader in(bytes, from);
  while (!in.done()) {
    const char kind = in.kind();
    if (kind != '=' && kind != '~' && kind != '?') in.fail();
    std::string key = in.field();
    std::string value = in.field();
    if (kind == '=') facts.must_match[key] = std::move(value);
    else if (kind == '?') facts.should_match[key] = std::move(value);
    else facts.close[key] = parse_numbers(value, in);
  }
  return facts;
}

bool digests_agree(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() % 4 != 0) return false;
  for (std::size_t s = 0; s < a.size(); s += 4) {
    if (a[s] != b[s]) return false;  // the label
    // Sums of the same values rounded differently stay within a tiny fraction of the summed
    // magnitudes; the weighted sum's weights reach 7.
    const double scale = std::max({std::abs(a[s + 2]), std::abs(b[s + 2]), 1e-30});
    const double limits[3] = {scale, scale, 7 * scale};
    for (int k = 0; k < 3; ++k) {
      const double x = a[s + 1 + k], y = b[s + 1 + k];
      if (!(std::abs(x - y) <= kTolerance * limits[k])) return false;  // also false for NaN
    }
  }
  return true;
}

FactDifferences compare(const RankFacts& rank0, const RankFacts& other) {
  FactDifferences d;
  compare_maps(rank0.must_match, other.must_match, std::equal_to<>(), differ_text, d.errors);
  compare_maps(
      rank0.close, other.close, digests_agree,
      [](const std::string& key, const std::vector<double>* theirs, const std::vector<double>* ours) {
        if (!theirs || !ours) return fmt::format("{}: {}", key, theirs ? "rank 0 read none" : "read none");
        return fmt::format("{} differ from rank 0's (other files, another order or other preprocessing)", key);
      },
      d.errors);
  compare_maps(
      rank0.should_match, other.should_match, std::equal_to<>(),
      [](const std::string& key, const std::string* theirs, const std::string* ours) {
        return fmt::format("{}: build {} where rank 0 has {}", key, theirs ? *theirs : "none", ours ? *ours : "none");
      },
      d.warnings);
  return d;
}

std::string agreement_verdict(const std::vector<FactDifferences>& by_rank) {
  std::vector<std::string> parts;
  int differing = 0;
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    const auto& errors = by_rank[r].errors;
    if (errors.empty()) continue;
    if (++differing > kRanksNamed) continue;
    const std::size_t shown = std::min<std::size_t>(errors.size(), kDiffsPerRank);
    std::string text = fmt::format("rank {}: {}", r, fmt::join(errors.begin(), errors.begin() + shown, "; "));
    if (errors.size() > shown) text += fmt::format(" (and {} more)", errors.size() - shown);
    parts.push_back(std::move(text));
  }
  if (differing == 0) return "";
  std::string more = differing > kRanksNamed ? fmt::format("; {} more ranks differ", differing - kRanksNamed) : "";
  return fmt::format("the ranks do not run the same training: {}{}. Every rank must run the same Kiln and plugins "
                     "with the same config and the same data; fix the config, install or dataset on the named ranks' "
                     "hosts (nothing was written)",
                     fmt::join(parts, "; "), more);
}

Agreement check_ranks_agree(Store& store, const RankInfo& ranks, const RankFacts& mine,
                            std::chrono::milliseconds timeout, const std::string& store_name) {
  Agreement out;
  out.facts = mine.must_match.size() + mine.close.size() + mine.should_match.size();
  if (ranks.world_size < 2) return out;
  const std::string prefix = "kiln/agreement/";
  const std::string my_key = fmt::format("{}rank{}", prefix, ranks.rank);
  dist::refuse_earlier_keys(store, my_key, ranks, store_name);
  store.set(my_key, encode(mine));
  // Every rank waits for all: a rank that never arrives is named in each one's error.
  std::vector<std::string> keys;
  for (int r = 0; r < ranks.world_size; ++r) keys.push_back(fmt::format("{}rank{}", prefix, r));
  store.wait(keys, timeout);
  // Ends in "rank0", so a rank 0 that dies before publishing it is named too.
  const std::string verdict_key = prefix + "verdict/rank0";
  std::string verdict;
  if (ranks.rank == 0) {
    std::vector<FactDifferences> by_rank(static_cast<std::size_t>(ranks.world_size));
    for (int r = 1; r < ranks.world_size; ++r) {
      const std::string from = fmt::format("rank {}'s facts", r);
      auto& d = by_rank[static_cast<std::size_t>(r)];
      d = compare(mine, decode(store.get(keys[static_cast<std::size_t>(r)], timeout), from));
      for (const auto& w : d.warnings) {
        out.warnings.push_back(
            fmt::format("rank {} runs another build of the {}; results may differ between ranks in the last bits", r, w));
      }
    }
    verdict = agreement_verdict(by_rank);
    store.set(verdict_key, {verdict.begin(), verdict.end()});
  } else {
    const auto bytes = store.get(verdict_key, timeout);
    verdict.assign(bytes.begin(), bytes.end());
  }
  if (!verdict.empty()) {
    // Rank 0 empties a file: store when its start fails (run.cpp, stores.hpp), so it leaves only
    // once every rank has read the verdict; a rank that died in between costs it the timeout.
    const std::string read_prefix = prefix + "verdict-read/";
    if (ranks.rank == 0) {
      std::vector<std::string> read;
      for (int r = 1; r < ranks.world_size; ++r) read.push_back(fmt::format("{}rank{}", read_prefix, r));
      try {
        store.wait(read, timeout);
      } catch (const CommError&) {  // the verdict is the error to report
      }
    } else {
      store.set(fmt::format("{}rank{}", read_prefix, ranks.rank), {});
    }
    throw ConfigError(verdict);
  }
  return out;
}

}  // namespace kiln::train
