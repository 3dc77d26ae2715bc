// cast f32 <-> bf16 / f16: round-to-nearest-even against an independent reference (rounding the
// significand with nearbyint in double), ties, subnormals, overflow, inf and NaN, round trips.
#include <boost/test/unit_test.hpp>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

/// x rounded to `bits` significant bits, ties to even; values below 2^min_exp use the fixed
/// subnormal quantum 2^(min_exp - bits + 1); results above max_finite become inf.
double round_ref(double x, int bits, int min_exp, double max_finite) {
  if (!std::isfinite(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);  // x = f * 2^e, f in [0.5, 1)
  const int exp = std::max(e - 1, min_exp);
  const double quantum = std::ldexp(1.0, exp - bits + 1);
  const double r = std::nearbyint(x / quantum) * quantum;
  if (std::abs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}
double bf16_ref(double x) { return round_ref(x, 8, -126, 3.3895313892515355e38); }
double f16_ref(double x) { return round_ref(x, 11, -14, 65504.0); }

std::vector<float> round_trip(const std::vector<float>& in, DType via) {
  Tensor src = test::f32_tensor({static_cast<std::int64_t>(in.size())}, in);
  Tensor mid = test::poisoned(src.shape(), via);
  Tensor back = test::poisoned(src.shape());
  cpu().cast(mid, src);
  cpu().cast(back, mid);
  const float* p = back.data_as<float>();
  return std::vector<float>(p, p + in.size());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cast)

BOOST_AUTO_TEST_CASE(random_values_round_to_nearest_even) {
  BOOST_TEST_REQUIRE(std::fegetround() == FE_TONEAREST);
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::vector<float> in;
  for (int i = 0; i < 40000; ++i) in.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  const std::vector<float> bf = round_trip(in, DType::bf16);
  const std::vector<float> h = round_trip(in, DType::f16);
  int bad_bf = 0, bad_h = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    bad_bf += static_cast<double>(bf[i]) != bf16_ref(in[i]);
    bad_h += static_cast<double>(h[i]) != f16_ref(in[i]);
  }
  BOOST_TEST(bad_bf == 0);
  BOOST_TEST(bad_h == 0);
}

BOOST_AUTO_TEST_CASE(ties_and_specials) {
  const float inf = std::numeric_limits<float>::infinity();
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1 (even);
  // 1 + 3 * 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6 (even).
  const std::vector<float> bf = round_trip(
      {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, inf, -inf, 3.0e38f, 1e-40f}, DType::bf16);
  BOOST_TEST(bf[0] == 1.0f);
  BOOST_TEST(bf[1] == 1.0f + 0x1p-6f);
  BOOST_TEST((bf[2] == 0.0f && std::signbit(bf[2])));
  BOOST_TEST(bf[3] == inf);
  BOOST_TEST(bf[4] == -inf);
  BOOST_TEST(static_cast<double>(bf[5]) == bf16_ref(3.0e38));
  BOOST_TEST(static_cast<double>(bf[6]) == bf16_ref(1e-40f));
  const std::vector<float> h = round_trip(
      {65504.0f, 65519.0f, 65520.0f, 1e6f, 0x1p-24f, 0x1p-25f, 0x1.8p-24f, 1.0f + 0x1p-11f,
       -inf},
      DType::f16);
  BOOST_TEST(h[0] == 65504.0f);
  BOOST_TEST(h[1] == 65504.0f);
  BOOST_TEST(h[2] == inf);        // the tie above the largest finite value rounds to inf
  BOOST_TEST(h[3] == inf);
  BOOST_TEST(h[4] == 0x1p-24f);   // smallest subnormal
  BOOST_TEST(h[5] == 0.0f);       // half of it: tie to even (0)
  BOOST_TEST(h[6] == 0x1p-23f);   // 1.5 quanta: tie to even (2 quanta)
  BOOST_TEST(h[7] == 1.0f);       // tie between 1 and 1 + 2^-10 -> 1
  BOOST_TEST(h[8] == -inf);
  for (DType d : {DType::bf16, DType::f16}) {
    const std::vector<float> nan = round_trip({std::numeric_limits<float>::quiet_NaN()}, d);
    BOOST_TEST(std::isnan(nan[0]));
  }
}

BOOST_AUTO_TEST_CASE(bit_patterns_and_errors) {
  Tensor src = test::f32_tensor({2}, {1.0f, -2.0f});
  Tensor bf = host_tensor({2}, DType::bf16), h = host_tensor({2}, DType::f16);
  cpu().cast(bf, src);
  cpu().cast(h, src);
  BOOST_TEST(static_cast<std::uint16_t*>(bf.data())[0] == 0x3f80);
  BOOST_TEST(static_cast<std::uint16_t*>(bf.data())[1] == 0xc000);
  BOOST_TEST(static_cast<std::uint16_t*>(h.data())[0] == 0x3c00);
  BOOST_TEST(static_cast<std::uint16_t*>(h.data())[1] == 0xc000);

  std::string msg = test::error_text<BackendError>([&] { cpu().cast(h, bf); });
  BOOST_TEST(msg.find("cannot convert src bf16(2) to dst f16(2)") != std::string::npos, msg);
  Tensor wrong = host_tensor({3}, DType::bf16);
  msg = test::error_text<BackendError>([&] { cpu().cast(wrong, src); });
  BOOST_TEST(msg.find("dst is bf16(3) but must have as many elements as src f32(2)") !=
             std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()
