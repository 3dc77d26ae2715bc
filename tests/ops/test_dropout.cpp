// dropout: the mask is exactly the documented counter-based function of (seed, index), kept
// fraction ~ 1 - p, scaling by 1 / (1 - p), determinism per seed, backward through the mask;
// bit-exact masks and values for every float dtype at p on 24-bit boundaries, any thread count.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"
#include "kiln/rng.hpp"
#include "kiln/sdk/half.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

bool reference_keeps(std::uint64_t seed, std::int64_t i, float p) {
  return unit_float(derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
}

// The element a kept x becomes, as the op computes it: widened to f32, times 1 / (1 - p) in
// f32, rounded back to the storage dtype (round to nearest even). Raw storage bits.
std::uint32_t scaled_bits(const Tensor& x, std::int64_t i, float inv_keep) {
  switch (x.dtype()) {
    case DType::bf16:
      return sdk::f32_to_bf16(sdk::bf16_to_f32(x.data_as<std::uint16_t>()[i]) * inv_keep);
    case DType::f16:
      return sdk::f32_to_f16(sdk::f16_to_f32(x.data_as<std::uint16_t>()[i]) * inv_keep);
    default: {
      const float v = x.data_as<float>()[i] * inv_keep;
      std::uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      return bits;
    }
  }
}

std::uint32_t stored_bits(const Tensor& t, std::int64_t i) {
  if (t.dtype() != DType::f32) return t.data_as<std::uint16_t>()[i];
  std::uint32_t bits;
  std::memcpy(&bits, t.data_as<float>() + i, sizeof bits);
  return bits;
}

// Runs forward and backward on `x` and counts elements whose mask, y or dx differ by a single
// bit from the reference formula (mask) and scaled_bits (y, dx; dropped elements are +0).
std::int64_t exact_mismatches(Backend& b, const Tensor& x, const Tensor& dy, float p, std::uint64_t seed) {
  const Shape shape = x.shape();
  Tensor y = test::poisoned(shape, x.dtype()), dx = test::poisoned(shape, x.dtype());
  Tensor mask = test::poisoned(shape, DType::u8);
  b.dropout_forward(y, mask, x, p, seed);
  b.dropout_backward(dx, dy, mask, p);
  const float inv_keep = 1.0f / (1.0f - p);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = reference_keeps(seed, i, p);
    bad += mask.data_as<std::uint8_t>()[i] != (keep ? 1 : 0);
    bad += stored_bits(y, i) != (keep ? scaled_bits(x, i, inv_keep) : 0u);
    bad += stored_bits(dx, i) != (keep ? scaled_bits(dy, i, inv_keep) : 0u);
  }
  return bad;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dropout)

BOOST_AUTO_TEST_CASE(forward_backward_match_the_counter_based_mask) {
  std::mt19937 rng(21);
  const std::int64_t n = 100000;
  const float p = 0.3f;
  const std::uint64_t seed = 0x1234abcdull;
  Tensor x = test::random_f32({n / 100, 100}, rng);
  Tensor y = test::poisoned({n / 100, 100});
  Tensor mask = test::poisoned({n / 100, 100}, DType::u8);
  cpu().dropout_forward(y, mask, x, p, seed);

  std::int64_t kept = 0, mask_mismatches = 0;
  std::vector<double> want_y, want_dx;
  Tensor dy = test::random_f32({n / 100, 100}, rng);
  for (std::int64_t i = 0; i < n; ++i) {
    const bool keep = unit_float(derive_seed(seed, static_cast<std::uint64_t>(i))) >= p;
    kept += keep;
    mask_mismatches += mask.data_as<std::uint8_t>()[i] != (keep ? 1 : 0);
    want_y.push_back(keep ? x.data_as<float>()[i] / (1.0 - p) : 0.0);
    want_dx.push_back(keep ? dy.data_as<float>()[i] / (1.0 - p) : 0.0);
  }
  BOOST_TEST(mask_mismatches == 0);
  const double fraction = static_cast<double>(kept) / n;
  BOOST_TEST(std::abs(fraction - 0.7) < 0.01, "kept fraction " << fraction);
  test::check_close(y, want_y, 1e-6, 0, "dropout forward");

  Tensor dx = test::poisoned({n / 100, 100});
  cpu().dropout_backward(dx, dy, mask, p);
  test::check_close(dx, want_dx, 1e-6, 0, "dropout backward");

  // Same seed, same mask; another seed, another mask.
  Tensor mask2 = test::poisoned({n / 100, 100}, DType::u8), y2 = test::poisoned({n / 100, 100});
  cpu().dropout_forward(y2, mask2, x, p, seed);
  BOOST_TEST(std::memcmp(mask.data(), mask2.data(), static_cast<std::size_t>(n)) == 0);
  cpu().dropout_forward(y2, mask2, x, p, seed + 1);
  BOOST_TEST(std::memcmp(mask.data(), mask2.data(), static_cast<std::size_t>(n)) != 0);
}

// The cpu kernel compares 24-bit integers against ceil(p * 2^24) instead of converting to float
// (plugins/backend-cpu/ops/dropout_mask.hpp). Here p sits exactly on an element's own value
// u / 2^24 (kept) and one float either side (kept below, dropped above), for every float dtype and
// for sizes that leave odd vector tails, a partial block (2048) and the threaded path (> 16384).
BOOST_AUTO_TEST_CASE(masks_and_values_exact_at_24_bit_boundaries) {
  std::mt19937 rng(23);
  const std::uint64_t seed = 0x0dd5eedull;
  for (const std::int64_t n : {1, 7, 67, 2047, 2049, 20011}) {
    // The element whose value the boundary p values sit on: the middle one, or the next with u > 0.
    std::int64_t j = n / 2;
    while (derive_seed(seed, static_cast<std::uint64_t>(j)) >> 40 == 0) ++j;
    if (j >= n) continue;
    const float on = static_cast<float>(derive_seed(seed, static_cast<std::uint64_t>(j)) >> 40) / 16777216.0f;
    const float ps[] = {on, std::nextafter(on, 0.0f), std::nextafter(on, 1.0f), 0.5f};
    for (const DType d : {DType::f32, DType::bf16, DType::f16}) {
      const Tensor x = test::to_dtype(test::random_f32({n}, rng, -4.0f, 4.0f), d);
      const Tensor dy = test::to_dtype(test::random_f32({n}, rng, -4.0f, 4.0f), d);
      for (const float p : ps) {
        BOOST_TEST(exact_mismatches(cpu(), x, dy, p, seed) == 0,
                   "n " << n << " " << dtype_name(d) << " p " << p);
      }
      // The boundary is really exercised: element j is kept at p == its value, dropped above.
      Tensor y = test::poisoned({n}, d), mask = test::poisoned({n}, DType::u8);
      cpu().dropout_forward(y, mask, x, on, seed);
      BOOST_TEST(mask.data_as<std::uint8_t>()[j] == 1);
      cpu().dropout_forward(y, mask, x, std::nextafter(on, 1.0f), seed);
      BOOST_TEST(mask.data_as<std::uint8_t>()[j] == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(same_bytes_for_one_and_two_threads) {
  std::mt19937 rng(24);
  const std::int64_t n = 100003;  // threaded path, with a partial last block
  ParamMap one("backend"), two("backend");
  one.set("threads", std::int64_t{1}, "test");
  two.set("threads", std::int64_t{2}, "test");
  test::BackendPtr b1 = test::make_cpu_backend(one), b2 = test::make_cpu_backend(two);
  for (const DType d : {DType::f32, DType::bf16}) {
    const Tensor x = test::to_dtype(test::random_f32({n}, rng), d);
    Tensor y1 = test::poisoned({n}, d), y2 = test::poisoned({n}, d);
    Tensor m1 = test::poisoned({n}, DType::u8), m2 = test::poisoned({n}, DType::u8);
    b1->dropout_forward(y1, m1, x, 0.25f, 99);
    b2->dropout_forward(y2, m2, x, 0.25f, 99);
    BOOST_TEST(std::memcmp(m1.data(), m2.data(), m1.bytes()) == 0);
    BOOST_TEST(std::memcmp(y1.data(), y2.data(), y1.bytes()) == 0);
    Tensor dx1 = test::poisoned({n}, d), dx2 = test::poisoned({n}, d);
    b1->dropout_backward(dx1, x, m1, 0.25f);
    b2->dropout_backward(dx2, x, m2, 0.25f);
    BOOST_TEST(std::memcmp(dx1.data(), dx2.data(), dx1.bytes()) == 0);
    BOOST_TEST(exact_mismatches(*b2, x, x, 0.25f, 99) == 0);
  }
}

BOOST_AUTO_TEST_CASE(in_place_equals_out_of_place) {
  std::mt19937 rng(25);
  for (const DType d : {DType::f32, DType::f16}) {
    const Tensor x = test::to_dtype(test::random_f32({3001}, rng), d);
    Tensor y = test::poisoned({3001}, d), mask = test::poisoned({3001}, DType::u8);
    cpu().dropout_forward(y, mask, x, 0.4f, 5);
    Tensor inplace = test::to_dtype(test::to_f32(x), d), mask2 = test::poisoned({3001}, DType::u8);
    cpu().dropout_forward(inplace, mask2, inplace, 0.4f, 5);
    BOOST_TEST(std::memcmp(inplace.data(), y.data(), y.bytes()) == 0);
    BOOST_TEST(std::memcmp(mask2.data(), mask.data(), mask.bytes()) == 0);
    cpu().dropout_backward(inplace, inplace, mask, 0.4f);  // dx = dy, same buffer
    Tensor dx = test::poisoned({3001}, d);
    cpu().dropout_backward(dx, y, mask, 0.4f);
    BOOST_TEST(std::memcmp(inplace.data(), dx.data(), dx.bytes()) == 0);
  }
}

BOOST_AUTO_TEST_CASE(p_zero_is_a_copy) {
  std::mt19937 rng(22);
  Tensor x = test::random_f32({33}, rng);
  Tensor y = test::poisoned({33});
  Tensor mask = test::poisoned({33}, DType::u8);
  cpu().dropout_forward(y, mask, x, 0.0f, 7);
  for (int i = 0; i < 33; ++i) {
    BOOST_TEST(y.data_as<float>()[i] == x.data_as<float>()[i]);
    BOOST_TEST(mask.data_as<std::uint8_t>()[i] == 1);
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  Tensor x = host_tensor({4}, DType::f32), mask = host_tensor({4}, DType::u8);
  std::string msg =
      test::error_text<BackendError>([&] { cpu().dropout_forward(x, mask, x, 1.0f, 1); });
  BOOST_TEST(msg.find("cpu backend, dropout_forward: p = 1 is outside [0, 1)") != std::string::npos, msg);
  Tensor small = host_tensor({3}, DType::u8);
  msg = test::error_text<BackendError>([&] { cpu().dropout_backward(x, x, small, 0.5f); });
  BOOST_TEST(msg.find("mask is u8(3) but must have as many elements as dy f32(4)") !=
             std::string::npos, msg);
  Tensor fmask = host_tensor({4}, DType::f32);
  msg = test::error_text<BackendError>([&] { cpu().dropout_forward(x, fmask, x, 0.5f, 1); });
  BOOST_TEST(msg.find("mask is f32(4) but must be u8") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()
