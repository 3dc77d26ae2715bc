// The cpu backend's vector f16 <-> f32 conversion (plugins/backend-cpu/ops/f16_convert.cpp),
// compiled into this test, against the SDK's scalar conversion (kiln/sdk/half.hpp), bit for bit,
// on every path this CPU can run: all 65536 f16 values widened; narrowing of every f16 value,
// of the exact halfway point between each pair of neighbours (ties to even) and of the f32
// values one ulp either side of it, of f32 values around f16's overflow and subnormal ranges,
// and of NaNs with payloads; buffer lengths that leave every possible tail.
#define KILN_TEST_MODULE test_f16_convert
#include "kiln_test_main.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln/sdk/half.hpp"
#include "ops/f16_convert.hpp"

namespace paths = kiln::cpu::f16_paths;

namespace {

using Widen = void (*)(const std::uint16_t*, float*, std::size_t) noexcept;
using Narrow = void (*)(const float*, std::uint16_t*, std::size_t) noexcept;

struct Path {
  std::string name;
  Widen widen;
  Narrow narrow;
};

/// The paths this CPU can run, the dispatching entry points included.
std::vector<Path> runnable_paths() {
  std::vector<Path> out{{"scalar", paths::f16_to_f32_scalar, paths::f32_to_f16_scalar},
                        {"dispatch", kiln::cpu::f16_to_f32_n, kiln::cpu::f32_to_f16_n},
                        {"parallel", kiln::cpu::f16_to_f32_parallel, kiln::cpu::f32_to_f16_parallel}};
  if (paths::has_avx2_f16c()) out.push_back({"avx2", paths::f16_to_f32_avx2, paths::f32_to_f16_avx2});
  if (paths::has_avx512()) out.push_back({"avx512", paths::f16_to_f32_avx512, paths::f32_to_f16_avx512});
  return out;
}

std::vector<std::uint16_t> every_f16() {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  return all;
}

/// f32 inputs covering every rounding decision of f32 -> f16.
std::vector<float> narrowing_inputs() {
  std::vector<float> in;
  for (std::uint32_t h = 0; h < 0x7c00u; ++h) {  // finite non-negative f16 values and their upper neighbours
    const float v = kiln::sdk::f16_to_f32(static_cast<std::uint16_t>(h));
    const float next = kiln::sdk::f16_to_f32(static_cast<std::uint16_t>(h + 1));  // 0x7c00: inf
    const float mid = h + 1 == 0x7c00u ? 65520.0f : (v + next) / 2;  // exact in f32
    const std::uint32_t mid_bits = std::bit_cast<std::uint32_t>(mid);
    for (float x : {v, mid, std::bit_cast<float>(mid_bits - 1), std::bit_cast<float>(mid_bits + 1)}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  // Values f16 cannot hold: tiny (to zero or the smallest subnormal), f32 subnormals, huge.
  for (float x : {1e-8f, 2.9802322e-08f, 2.98023259e-08f, 1e-30f, 1e-40f, 1e-45f, 65519.996f, 65520.0f, 1e5f,
                  3e38f, INFINITY}) {
    in.push_back(x);
    in.push_back(-x);
  }
  // NaNs: quiet and signalling, with payloads in the bits f16 keeps and in those it drops.
  for (std::uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0x7fffffffu, 0x7f802000u, 0xffc00001u}) {
    in.push_back(std::bit_cast<float>(bits));
  }
  std::mt19937 rng(13);
  for (int i = 0; i < 200000; ++i) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  return in;
}

}  // namespace

BOOST_AUTO_TEST_CASE(reports_the_path_it_uses) {
  const std::string isa = kiln::cpu::f16_convert_isa();
  BOOST_TEST_MESSAGE("f16 conversion path on this CPU: " << isa);
  const std::string expected = paths::has_avx512() ? "avx512" : paths::has_avx2_f16c() ? "avx2+f16c" : "scalar";
  BOOST_TEST(isa == expected);
}

BOOST_AUTO_TEST_CASE(widening_every_f16_value_matches_the_scalar_bits) {
  const std::vector<std::uint16_t> all = every_f16();
  for (const Path& p : runnable_paths()) {
    std::vector<float> out(all.size(), 1234.5f);
    p.widen(all.data(), out.data(), all.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::uint32_t want = std::bit_cast<std::uint32_t>(kiln::sdk::f16_to_f32(all[i]));
      if (std::bit_cast<std::uint32_t>(out[i]) != want) {
        if (wrong++ < 5) BOOST_ERROR(p.name << ": f16 0x" << std::hex << all[i] << " -> 0x" << std::bit_cast<std::uint32_t>(out[i]) << ", scalar 0x" << want);
      }
    }
    BOOST_TEST(wrong == 0u, p.name << ": " << wrong << " of 65536 differ");
  }
}

BOOST_AUTO_TEST_CASE(narrowing_matches_the_scalar_bits_at_every_rounding_boundary) {
  const std::vector<float> in = narrowing_inputs();
  for (const Path& p : runnable_paths()) {
    std::vector<std::uint16_t> out(in.size(), 0xdeadu & 0xffffu);
    p.narrow(in.data(), out.data(), in.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::uint16_t want = kiln::sdk::f32_to_f16(in[i]);
      if (out[i] != want && wrong++ < 5) {
        BOOST_ERROR(p.name << ": f32 0x" << std::hex << std::bit_cast<std::uint32_t>(in[i]) << " -> 0x" << out[i]
                           << ", scalar 0x" << want);
      }
    }
    BOOST_TEST(wrong == 0u, p.name << ": " << wrong << " of " << in.size() << " differ");
  }
}

BOOST_AUTO_TEST_CASE(every_length_converts_exactly_its_elements) {
  // Lengths 0..40 cover every tail of 8- and 16-lane loops; the element past the end is untouched.
  for (const Path& p : runnable_paths()) {
    for (std::size_t n = 0; n <= 40; ++n) {
      std::vector<std::uint16_t> h(n + 1, 0x3c00u);  // 1.0
      std::vector<float> f(n + 1, -7.0f);
      for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<std::uint16_t>(0x3c00u + i);
      p.widen(h.data(), f.data(), n);
      BOOST_TEST(f[n] == -7.0f, p.name << " widen n=" << n << " wrote past the end");
      std::vector<std::uint16_t> back(n + 1, 0xabcdu);
      p.narrow(f.data(), back.data(), n);
      BOOST_TEST(back[n] == 0xabcdu, p.name << " narrow n=" << n << " wrote past the end");
      for (std::size_t i = 0; i < n; ++i) BOOST_TEST(back[i] == h[i], p.name << " n=" << n << " i=" << i);
    }
  }
}
