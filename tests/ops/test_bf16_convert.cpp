// The cpu backend's vector bf16 <-> f32 conversion (plugins/backend-cpu/ops/bf16_convert.cpp),
// compiled into this test, against the SDK's scalar conversion (kiln/sdk/half.hpp), bit for bit,
// on every path this CPU can run: all 65536 bf16 values widened; narrowing (and rounding in f32)
// of every bf16 value with each low half that decides its rounding (0, 1, just below, at and just
// above the tie, all ones), which covers ties to even, carries into the exponent, overflow to inf,
// f32 subnormals, infinities and NaNs with every payload the top half can hold, plus random bit
// patterns; and buffer lengths that leave every possible tail.
#define KILN_TEST_MODULE test_bf16_convert
#include "kiln_test_main.hpp"

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln/sdk/half.hpp"
#include "ops/bf16_convert.hpp"

namespace paths = kiln::cpu::bf16_paths;

namespace {

using Widen = void (*)(const std::uint16_t*, float*, std::size_t) noexcept;
using Narrow = void (*)(const float*, std::uint16_t*, std::size_t) noexcept;
using Round = void (*)(const float*, float*, std::size_t) noexcept;

struct Path {
  std::string name;
  Widen widen;
  Narrow narrow;
  Round round;
};

/// The paths this CPU can run, the dispatching entry points included.
std::vector<Path> runnable_paths() {
  std::vector<Path> out{
      {"scalar", paths::bf16_to_f32_scalar, paths::f32_to_bf16_scalar, paths::f32_round_to_bf16_scalar},
      {"dispatch", kiln::cpu::bf16_to_f32_n, kiln::cpu::f32_to_bf16_n, kiln::cpu::f32_round_to_bf16_n},
      {"parallel", kiln::cpu::bf16_to_f32_parallel, kiln::cpu::f32_to_bf16_parallel,
       kiln::cpu::f32_round_to_bf16_parallel}};
  if (paths::has_avx2()) {
    out.push_back({"avx2", paths::bf16_to_f32_avx2, paths::f32_to_bf16_avx2, paths::f32_round_to_bf16_avx2});
  }
  if (paths::has_avx512()) {
    out.push_back({"avx512", paths::bf16_to_f32_avx512, paths::f32_to_bf16_avx512, paths::f32_round_to_bf16_avx512});
  }
  return out;
}

/// f32 inputs covering every rounding decision of f32 -> bf16.
std::vector<float> narrowing_inputs() {
  std::vector<float> in;
  for (std::uint32_t high = 0; high < 65536u; ++high) {
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      in.push_back(std::bit_cast<float>(high << 16 | low));
    }
  }
  std::mt19937 rng(17);
  for (int i = 0; i < 300000; ++i) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  return in;
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

}  // namespace

BOOST_AUTO_TEST_CASE(reports_the_path_it_uses) {
  const std::string isa = kiln::cpu::bf16_convert_isa();
  BOOST_TEST_MESSAGE("bf16 conversion path on this CPU: " << isa);
  const std::string expected = paths::has_avx512() ? "avx512" : paths::has_avx2() ? "avx2" : "scalar";
  BOOST_TEST(isa == expected);
}

BOOST_AUTO_TEST_CASE(widening_every_bf16_value_matches_the_scalar_bits) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  for (const Path& p : runnable_paths()) {
    std::vector<float> out(all.size(), 1234.5f);
    p.widen(all.data(), out.data(), all.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::uint32_t want = bits(kiln::sdk::bf16_to_f32(all[i]));
      if (bits(out[i]) != want && wrong++ < 5) {
        BOOST_ERROR(p.name << ": bf16 0x" << std::hex << all[i] << " -> 0x" << bits(out[i]) << ", scalar 0x" << want);
      }
    }
    BOOST_TEST(wrong == 0u, p.name << ": " << wrong << " of 65536 differ");
  }
}

BOOST_AUTO_TEST_CASE(narrowing_and_rounding_match_the_scalar_bits_at_every_boundary) {
  const std::vector<float> in = narrowing_inputs();
  for (const Path& p : runnable_paths()) {
    std::vector<std::uint16_t> out(in.size(), 0xdeadu);
    std::vector<float> rounded(in.size(), -3.0f);
    p.narrow(in.data(), out.data(), in.size());
    p.round(in.data(), rounded.data(), in.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::uint16_t want = kiln::sdk::f32_to_bf16(in[i]);
      const std::uint32_t want_rounded = static_cast<std::uint32_t>(want) << 16;
      if ((out[i] != want || bits(rounded[i]) != want_rounded) && wrong++ < 5) {
        BOOST_ERROR(p.name << ": f32 0x" << std::hex << bits(in[i]) << " -> 0x" << out[i] << " / rounded 0x"
                           << bits(rounded[i]) << ", scalar 0x" << want);
      }
    }
    BOOST_TEST(wrong == 0u, p.name << ": " << wrong << " of " << in.size() << " differ");
  }
}

BOOST_AUTO_TEST_CASE(the_scalar_reference_rounds_as_documented) {
  // Anchors for the bit patterns above, so a change to the SDK's rounding cannot pass unnoticed.
  BOOST_TEST(kiln::sdk::f32_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80u);  // tie, even stays
  BOOST_TEST(kiln::sdk::f32_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82u);  // tie, odd rounds up
  BOOST_TEST(kiln::sdk::f32_to_bf16(std::bit_cast<float>(0x7f7f8000u)) == 0x7f80u);  // past max: inf
  BOOST_TEST(kiln::sdk::f32_to_bf16(std::bit_cast<float>(0x00008000u)) == 0x0000u);  // subnormal tie to 0
  BOOST_TEST(kiln::sdk::f32_to_bf16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0u);  // signalling NaN quieted
  BOOST_TEST(kiln::sdk::f32_to_bf16(std::bit_cast<float>(0xff810000u)) == 0xffc1u);  // sign and payload kept
}

BOOST_AUTO_TEST_CASE(in_place_rounding_is_allowed) {
  std::vector<float> v(37);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + static_cast<float>(i) * 1e-3f;
  for (const Path& p : runnable_paths()) {
    std::vector<float> work = v;
    p.round(work.data(), work.data(), work.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      BOOST_TEST(bits(work[i]) == static_cast<std::uint32_t>(kiln::sdk::f32_to_bf16(v[i])) << 16, p.name << " i=" << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_length_converts_exactly_its_elements) {
  // Lengths 0..40 cover every tail of 8- and 16-lane loops; the element past the end is untouched.
  for (const Path& p : runnable_paths()) {
    for (std::size_t n = 0; n <= 40; ++n) {
      std::vector<std::uint16_t> h(n + 1, 0x3f80u);  // 1.0
      std::vector<float> f(n + 1, -7.0f);
      for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<std::uint16_t>(0x3f80u + i);
      p.widen(h.data(), f.data(), n);
      BOOST_TEST(f[n] == -7.0f, p.name << " widen n=" << n << " wrote past the end");
      std::vector<std::uint16_t> back(n + 1, 0xabcdu);
      p.narrow(f.data(), back.data(), n);
      BOOST_TEST(back[n] == 0xabcdu, p.name << " narrow n=" << n << " wrote past the end");
      std::vector<float> r(n + 1, -9.0f);
      p.round(f.data(), r.data(), n);
      BOOST_TEST(r[n] == -9.0f, p.name << " round n=" << n << " wrote past the end");
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST(back[i] == h[i], p.name << " n=" << n << " i=" << i);
        BOOST_TEST(bits(r[i]) == bits(f[i]), p.name << " n=" << n << " i=" << i);
      }
    }
  }
}
