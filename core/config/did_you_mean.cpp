// "Did you mean" suggestions for unknown keys, tables and choices.
//
// Distance is optimal string alignment (Levenshtein plus adjacent transpositions, so "hdiden"
// is one edit from "hidden"). The threshold max(2, len/3) keeps short typos matched without
// suggesting unrelated words for long ones; ties go to the earlier candidate, so callers list
// candidates in a meaningful order.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "config_impl.hpp"

namespace kiln::config {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j] over prefixes a[0..i), b[0..j), rows of length b.size() + 1.
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> d((n + 1) * (m + 1));
  auto at = [&](std::size_t i, std::size_t j) -> std::size_t& { return d[i * (m + 1) + j]; };
  for (std::size_t i = 0; i <= n; ++i) at(i, 0) = i;
  for (std::size_t j = 0; j <= m; ++j) at(0, j) = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t best = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        best = std::min(best, at(i - 2, j - 2) + 1);
      }
      at(i, j) = best;
    }
  }
  return at(n, m);
}

}  // namespace

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates) {
  const std::size_t threshold = std::max<std::size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = threshold + 1;
  for (const std::string& c : candidates) {
    if (c == word) continue;  // suggesting the word itself helps nobody
    const std::size_t dist = edit_distance(word, c);
    if (dist < best_distance) {
      best_distance = dist;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> c = closest(word, candidates);
  return c ? fmt::format(" (did you mean '{}'?)", *c) : std::string();
}

}  // namespace kiln::config
