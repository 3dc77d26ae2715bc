// The cpu backend's vectorised dropout mask (plugins/backend-cpu/ops/dropout_mask.hpp), compiled
// into this test, against the shared definition keep(i) = unit_float(derive_seed(seed, i)) >= p
// (kiln/rng.hpp): the integer threshold at every 24-bit boundary (each k / 2^24 and the floats
// one ulp either side), at subnormal and random p; the folded hash against derive_seed; and the
// mask loop over lengths and offsets that leave every vector tail.
#define KILN_TEST_MODULE test_dropout_mask
#include "kiln_test_main.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kiln/rng.hpp"
#include "ops/dropout_mask.hpp"

using kiln::cpu::dropout_bits24;
using kiln::cpu::dropout_threshold;
using kiln::cpu::fill_dropout_mask;

namespace {

// The definition's float compare for a 24-bit value u.
bool float_keeps(std::uint32_t u, float p) { return kiln::unit_float(std::uint64_t{u} << 40) >= p; }

// Both sides are monotone in u (a larger u is never dropped where a smaller one is kept), so
// they agree for every u in [0, 2^24) iff they agree at t - 1 and t, the threshold's edge.
std::int64_t threshold_disagreements(float p) {
  const std::uint32_t t = dropout_threshold(p);
  std::int64_t bad = 0;
  if (t > 0u) bad += float_keeps(t - 1u, p);  // must be dropped
  if (t < (1u << 24)) bad += !float_keeps(t, p);  // must be kept
  return bad;
}

}  // namespace

BOOST_AUTO_TEST_CASE(threshold_equals_the_float_compare_at_every_24_bit_boundary) {
  std::int64_t bad = 0, wrong_value = 0;
  for (std::uint32_t k = 0; k < (1u << 24); ++k) {
    const float p = static_cast<float>(k) * (1.0f / 16777216.0f);  // exact
    const float above = std::nextafter(p, 1.0f);
    wrong_value += dropout_threshold(p) != k;
    wrong_value += dropout_threshold(above) != k + 1;
    bad += threshold_disagreements(p) + threshold_disagreements(above);
    if (k > 0) {
      const float below = std::nextafter(p, 0.0f);
      // k when `below` is still above (k - 1) / 2^24 (spacing finer than 2^-24, p <= 1/2),
      // k - 1 when it is exactly that; the float compare decides which is right.
      const std::uint32_t t = dropout_threshold(below);
      wrong_value += t != k && t != k - 1;
      bad += threshold_disagreements(below);
    }
  }
  BOOST_TEST(wrong_value == 0);
  BOOST_TEST(bad == 0);
  // The largest p below 1 is exactly (2^24 - 1) / 2^24: it keeps only u = 2^24 - 1.
  const float last = std::nextafter(1.0f, 0.0f);
  BOOST_TEST(dropout_threshold(last) == (1u << 24) - 1u);
  BOOST_TEST(threshold_disagreements(last) == 0);
}

BOOST_AUTO_TEST_CASE(threshold_at_tiny_and_random_p) {
  const float tiny[] = {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                        1e-30f, 1e-8f, 5.9604645e-8f /* 2^-24 */};
  for (const float p : tiny) {
    BOOST_TEST(dropout_threshold(p) == 1u, p);  // only u = 0 is dropped
    BOOST_TEST(threshold_disagreements(p) == 0, p);
  }
  BOOST_TEST(dropout_threshold(6e-8f) == 2u);  // just above 2^-24: u = 0 and 1 are dropped
  BOOST_TEST(threshold_disagreements(6e-8f) == 0);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::int64_t bad = 0;
  for (int trial = 0; trial < 1000000; ++trial) bad += threshold_disagreements(uniform(rng));
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_CASE(folded_hash_equals_derive_seed) {
  const std::uint64_t seeds[] = {0, 1, 0x1234abcdull, 0x5eed1234abcdull, ~0ull, 0x8000000000000000ull};
  std::mt19937_64 rng(9);
  std::int64_t bad = 0;
  for (const std::uint64_t seed : seeds) {
    for (std::uint64_t i = 0; i < 100000; ++i) bad += dropout_bits24(seed, i) != kiln::derive_seed(seed, i) >> 40;
    for (int trial = 0; trial < 100000; ++trial) {
      const std::uint64_t s = rng(), i = rng();
      bad += dropout_bits24(s, i) != kiln::derive_seed(s, i) >> 40;
    }
  }
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_CASE(mask_loop_over_every_tail_and_offset) {
  const std::uint64_t seed = 0xfeedbeefull;
  const float ps[] = {0.1f, 0.3f, 0.5f, 0.9f};
  std::int64_t bad = 0, checked = 0;
  for (const float p : ps) {
    const std::uint32_t t = dropout_threshold(p);
    for (const std::int64_t first : {std::int64_t{0}, std::int64_t{1}, std::int64_t{13}, std::int64_t{1} << 33}) {
      for (std::int64_t count = 0; count <= 131; ++count) {
        std::vector<std::uint8_t> keep(static_cast<std::size_t>(count) + 1, 0xA5);
        fill_dropout_mask(keep.data(), first, count, seed, t);
        for (std::int64_t j = 0; j < count; ++j) {
          const std::uint64_t i = static_cast<std::uint64_t>(first + j);
          bad += keep[static_cast<std::size_t>(j)] != (kiln::unit_float(kiln::derive_seed(seed, i)) >= p ? 1 : 0);
          ++checked;
        }
        bad += keep[static_cast<std::size_t>(count)] != 0xA5;  // nothing past the end
      }
    }
  }
  BOOST_TEST(checked > 0);
  BOOST_TEST(bad == 0);
}
