// Backend::lerp on the cpu backend ([ema]'s moving average: dst += weight * (src - dst)): every
// element is torch.lerp's f32 formula for its side of weight 0.5, rounded per operation or as one
// fma (the contract allows either; -march=native may fuse), on a tensor too small to split and one
// that the OpenMP team splits; weight 0 leaves dst and weight 1 gives src bit for bit; src may be
// dst; bad arguments are refused by name before anything is written. (Every backend runs the same
// rules through `kiln plugins test`'s conformance case lerp.)
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

/// Serial, and split across the team (kParallelMinElements is 16384), with an odd tail.
constexpr std::int64_t kSizes[] = {1000, 100003};

/// A copy of `t` (host f32), so the op can run on it while `t` keeps the inputs.
Tensor copy_of(const Tensor& t) {
  Tensor c = host_tensor(t.shape(), DType::f32);
  std::memcpy(c.data(), t.data(), t.bytes());
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) { return std::memcmp(a.data(), b.data(), a.bytes()) == 0; }

/// Elements of got that are neither the plain nor the fused f32 value of torch.lerp's formula.
std::int64_t off_formula(const Tensor& got, const Tensor& dst0, const Tensor& src, float w) {
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const float d = dst0.data_as<float>()[i], s = src.data_as<float>()[i], diff = s - d;
    // volatile: the product is rounded on its own even where this compiler would fuse it.
    volatile float part = w < 0.5f ? w * diff : diff * (1.0f - w);
    const float plain = w < 0.5f ? d + part : s - part;
    const float fused = w < 0.5f ? std::fma(w, diff, d) : std::fma(-diff, 1.0f - w, s);
    const float g = got.data_as<float>()[i];
    off += g != plain && g != fused;
  }
  return off;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lerp)

BOOST_AUTO_TEST_CASE(every_element_is_torch_lerps_formula_on_its_side_of_one_half) {
  std::mt19937 rng(17);
  for (const std::int64_t n : kSizes) {
    const Tensor dst0 = test::random_f32({n}, rng, -3.0f, 3.0f), src = test::random_f32({n}, rng, -3.0f, 3.0f);
    // 1e-4 is [ema]'s typical 1 - decay; 0.4999 and 0.5 straddle the switch between the sides.
    for (const float w : {1e-4f, 0.25f, 0.4999f, 0.5f, 0.75f, 0.9999f}) {
      Tensor dst = copy_of(dst0);
      cpu().lerp(dst, src, w);
      BOOST_TEST(off_formula(dst, dst0, src, w) == 0, "n = " << n << ", weight = " << w);
      // And within one rounding of the exact value (both sides are that close for w in [0, 1]).
      std::vector<double> want(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        const double d = dst0.data_as<float>()[i], s = src.data_as<float>()[i];
        want[static_cast<std::size_t>(i)] = d + double{w} * (s - d);
      }
      test::check_close(dst, want, 1e-6, 1e-6, "lerp n = " + std::to_string(n) + " weight = " + std::to_string(w));
    }
  }
}

BOOST_AUTO_TEST_CASE(weight_0_leaves_dst_and_weight_1_gives_src_bit_for_bit) {
  std::mt19937 rng(18);
  for (const std::int64_t n : kSizes) {
    // Magnitudes far apart, where a formula anchored at the wrong end would round away from them.
    Tensor dst0 = test::random_f32({n}, rng, -1000.0f, 1000.0f), src = test::random_f32({n}, rng, -1e-3f, 1e-3f);
    Tensor dst = copy_of(dst0);
    cpu().lerp(dst, src, 0.0f);
    BOOST_TEST(same_bits(dst, dst0), "n = " << n << ": weight 0 changed dst");
    cpu().lerp(dst, src, 1.0f);
    BOOST_TEST(same_bits(dst, src), "n = " << n << ": weight 1 did not give src");
  }
}

BOOST_AUTO_TEST_CASE(src_may_be_dst) {
  std::mt19937 rng(19);
  for (const std::int64_t n : kSizes) {
    const Tensor dst0 = test::random_f32({n}, rng, -3.0f, 3.0f);
    for (const float w : {0.25f, 0.75f}) {
      Tensor dst = copy_of(dst0);
      cpu().lerp(dst, dst, w);  // src - dst = 0 on either side: nothing moves
      BOOST_TEST(same_bits(dst, dst0), "n = " << n << ", weight = " << w);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_errors_naming_lerp_and_write_nothing) {
  const Tensor src = test::f32_tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor dst = test::f32_tensor({2, 3}, {0, 0, 0, 0, 0, 0});
  const auto error = [&](const Tensor& d, const Tensor& s, float w) {
    return test::error_text<BackendError>([&] { cpu().lerp(d, s, w); });
  };
  const std::string prefix = "cpu backend, lerp: ";
  std::string msg = error(dst, test::f32_tensor({6}, {1, 2, 3, 4, 5, 6}), 0.5f);
  BOOST_TEST(msg.find(prefix + "src is f32(6) but must have the shape of dst f32(2, 3)") != std::string::npos, msg);
  msg = error(host_tensor({2, 3}, DType::bf16), host_tensor({2, 3}, DType::bf16), 0.5f);
  BOOST_TEST(msg.find(prefix + "dst is bf16(2, 3) but must be f32") != std::string::npos, msg);
  for (const float w : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    msg = error(dst, src, w);
    BOOST_TEST(msg.find(prefix + "weight = ") != std::string::npos, msg);
    BOOST_TEST(msg.find(" must be in [0, 1]") != std::string::npos, msg);
  }
  BOOST_TEST(error(dst, src, -0.1f).find("weight = -0.1 must") != std::string::npos);
  BOOST_TEST(error(dst, src, std::numeric_limits<float>::quiet_NaN()).find("weight = nan must") != std::string::npos);
  for (std::int64_t i = 0; i < 6; ++i) BOOST_TEST(dst.data_as<float>()[i] == 0.0f);  // refused calls wrote nothing
}

BOOST_AUTO_TEST_SUITE_END()
