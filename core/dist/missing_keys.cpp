// Timeout messages for rendezvous stores (see missing_keys.hpp).
#include "missing_keys.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

namespace kiln::dist::detail {

int rank_of_key(const std::string& key) {
  const auto slash = key.rfind('/');
  const std::string_view last = slash == std::string::npos ? std::string_view(key)
                                                           : std::string_view(key).substr(slash + 1);
  if (last.size() <= 4 || last.substr(0, 4) != "rank") return -1;
  int rank = -1;
  const auto digits = last.substr(4);
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size() || rank < 0) return -1;
  return rank;
}

std::string format_duration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{:.3g} s", static_cast<double>(d.count()) / 1000.0);
}

std::string waited_for(const std::vector<std::string>& missing, int world_size) {
  std::vector<int> ranks;
  for (const auto& key : missing) {
    const int r = rank_of_key(key);
    if (r >= 0) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return fmt::format("{} key{}", missing.size(), missing.size() == 1 ? "" : "s");
  std::string out = fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
  if (world_size > 0) out += fmt::format(" of {}", world_size);
  return out;
}

std::string timeout_message(const std::vector<std::string>& missing, std::chrono::milliseconds timeout,
                            int world_size, const std::string& where) {
  return fmt::format(
      "rendezvous timed out after {} waiting for {} (missing keys: {} in {}); check that every rank was "
      "started, is still alive and uses the same store",
      format_duration(timeout), waited_for(missing, world_size), fmt::join(missing, ", "), where);
}

StoreTimeout::StoreTimeout(std::vector<std::string> missing, std::chrono::milliseconds timeout, int world_size,
                           std::string where)
    : CommError(timeout_message(missing, timeout, world_size, where)),
      missing_(std::move(missing)),
      world_size_(world_size),
      where_(std::move(where)) {}

}  // namespace kiln::dist::detail
