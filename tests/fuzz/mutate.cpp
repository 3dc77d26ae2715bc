// See mutate.hpp.
#include "mutate.hpp"

#include <algorithm>
#include <array>

namespace kiln::fuzz {
namespace {

/// splitmix64: a counter-based generator, good enough to pick mutations and reproducible anywhere.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

/// Values that sit on the edges parsers check: zero, sign bits, all ones, lengths just past a
/// limit, ASCII that JSON and TOML treat specially.
constexpr std::array<std::uint64_t, 12> kEdges = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff,
                                                  0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, ~0ull};
constexpr std::string_view kSpecialChars = "\"\\{}[],:.-+eE0\n\t u#=";

void overwrite_integer(Bytes& b, Rng& rng) {
  const std::size_t width = std::size_t{1} << rng.below(4);  // 1, 2, 4 or 8 bytes
  if (b.size() < width) return;
  const std::size_t at = rng.below(b.size() - width + 1);
  const std::uint64_t value = kEdges[rng.below(kEdges.size())] + (rng.below(3) - 1);  // edge, edge +- 1
  const bool big_endian = rng.below(2) == 0;
  for (std::size_t i = 0; i < width; ++i) {
    const std::size_t shift = 8 * (big_endian ? width - 1 - i : i);
    b[at + i] = static_cast<std::uint8_t>(value >> shift);
  }
}

void mutate_once(Bytes& b, Rng& rng) {
  switch (rng.below(8)) {
    case 0:  // flip one bit
      if (!b.empty()) b[rng.below(b.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
      break;
    case 1:  // set one byte to an edge value or a character parsers care about
      if (!b.empty()) {
        const std::size_t at = rng.below(b.size());
        b[at] = rng.below(2) ? static_cast<std::uint8_t>(kEdges[rng.below(5)])
                             : static_cast<std::uint8_t>(kSpecialChars[rng.below(kSpecialChars.size())]);
      }
      break;
    case 2:
      overwrite_integer(b, rng);
      break;
    case 3:  // truncate
      b.resize(rng.below(b.size() + 1));
      break;
    case 4: {  // delete a run
      if (b.empty()) break;
      const std::size_t at = rng.below(b.size()), n = 1 + rng.below(std::min<std::size_t>(16, b.size() - at));
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
      break;
    }
    case 5: {  // duplicate a run in place
      if (b.empty()) break;
      const std::size_t at = rng.below(b.size()), n = 1 + rng.below(std::min<std::size_t>(64, b.size() - at));
      const Bytes run(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), run.begin(), run.end());
      break;
    }
    case 6: {  // insert random bytes
      const std::size_t at = rng.below(b.size() + 1), n = 1 + rng.below(8);
      for (std::size_t i = 0; i < n; ++i)
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(rng.next()));
      break;
    }
    default:  // swap two bytes
      if (b.size() >= 2) std::swap(b[rng.below(b.size())], b[rng.below(b.size())]);
      break;
  }
}

}  // namespace

Bytes mutate(Input seed, std::string_view salt, std::uint64_t index) {
  Rng rng{fnv1a(salt) ^ (index * 0xd1342543de82ef95ull)};
  Bytes b(seed.begin(), seed.end());
  const std::size_t rounds = 1 + rng.below(4);
  for (std::size_t i = 0; i < rounds; ++i) mutate_once(b, rng);
  return b;
}

}  // namespace kiln::fuzz
