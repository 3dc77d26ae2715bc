// dropout: the mask is exactly the documented counter-based function of (seed, index), kept
// fraction ~ 1 - p, scaling by 1 / (1 - p), determinism per seed, backward through the mask.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"
#include "kiln/rng.hpp"

using namespace kiln;
using kiln::test::cpu;

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
