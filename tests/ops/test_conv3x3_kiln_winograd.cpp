// The cpu backend's `conv3x3 = "kiln_winograd"`: Kiln's own AVX2 Winograd F(4x4, 3x3)
// (ops/winograd3x3.hpp) agrees with oneDNN's direct convolution to f32 rounding in all three
// directions, for every padding it takes (0, 1, 2), outputs that end inside a 4x4 tile, unequal
// and small channel counts, f32, f16 and bf16 plans (bf16 with the f32 master weights and
// gradients of mixed precision, and f32 inputs read rounded to bf16 as the direct path's edges
// round them); it really runs (the bits differ); and convolutions or operands it does not take
// run the direct primitives bit for bit. Runs on every CPU with AVX2 and FMA (both CI
// machine families; on AVX-512 ones too, since the option asks for Kiln's kernels explicitly).
#include <boost/test/unit_test.hpp>

#include <string>

#include "conv_directions.hpp"
#include "cpu_fixture.hpp"
#include "kiln/backend.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

/// The backend with Kiln's Winograd, or null on a CPU without AVX2, FMA and F16C, where asking for it
/// must be refused with the reason.
BackendPtr kiln_winograd(const std::string& bf16_compute = "auto") {
  try {
    return make_cpu_backend_with({{"conv3x3", "kiln_winograd"}, {"bf16_compute", bf16_compute}});
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("Kiln's Winograd convolutions need AVX2, FMA and F16C") != std::string::npos, msg);
    BOOST_TEST_MESSAGE("no AVX2, FMA and F16C on this CPU: " << msg);
    return nullptr;
  }
}

/// The direct convolutions to compare with, on the same channels-last layout the Winograd
/// backend's convolutions use (`conv_layout = "auto"` is blocked on AVX2 only with direct 3x3s).
BackendPtr direct_channels_last(const std::string& bf16_compute = "auto") {
  return make_cpu_backend_with({{"conv3x3", "direct"}, {"conv_layout", "channels_last"}, {"bf16_compute", bf16_compute}});
}

Conv2dDesc padded(Conv2dDesc d, std::int64_t pad) {
  d.pad_h = d.pad_w = pad;
  return d;
}

Conv2dDesc batch(Conv2dDesc d, std::int64_t n) {
  d.n = n;
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv3x3_kiln_winograd)

BOOST_AUTO_TEST_CASE(agrees_with_direct_to_f32_rounding) {
  auto winograd = kiln_winograd();
  if (!winograd) return;
  auto direct = direct_channels_last();
  BOOST_TEST(winograd->device().detail.find("3x3 convolutions by Kiln's Winograd in f32 plans") != std::string::npos,
             winograd->device().detail);
  // Batch 2 at 20x20 (800 output positions) and up; padding 0, 1 and 2 (the backward-data pass
  // runs with padding 2 - pad); 21x21 and 23x23 outputs end inside a tile; 8 channels is one
  // vector; 24 -> 40 channels are unequal and no multiple of 16; f16 plans compute in f32 and
  // take it too (their operands widened on load, rounded on store).
  const Conv2dDesc cases[] = {square_conv(32, 16, 20, 3, 1), square_conv(16, 48, 21, 3, 1),
                              padded(square_conv(8, 24, 22, 3, 1), 0), padded(square_conv(24, 40, 19, 3, 1), 2),
                              batch(square_conv(64, 64, 14, 3, 1), 3), square_conv(16, 32, 21, 3, 1, DType::f16)};
  for (const Conv2dDesc& d : cases) {
    BOOST_TEST_CONTEXT("n " << d.n << " c " << d.c << " k " << d.k << " side " << d.h << " pad " << d.pad_h << " "
                            << dtype_name(d.dtype)) {
      const ConvResults w = run_directions(*winograd, d, 11), r = run_directions(*direct, d, 11);
      BOOST_TEST_REQUIRE(!same_bits(w.y, r.y), "Winograd and direct gave the same bits: it did not run");
      BOOST_TEST_REQUIRE(!same_bits(w.dx, r.dx), "backward-data did not run by Winograd");
      BOOST_TEST_REQUIRE(!same_bits(w.dw, r.dw), "backward-filter did not run by Winograd");
      // As oneDNN's F(4x4, 3x3): the transforms scale values by up to ~10 before the products,
      // leaving ~1e-6 of the largest output in f32 (f16 outputs: their own rounding, 2^-11).
      const double bound = d.dtype == DType::f16 ? 2e-3 : 2e-5;
      check_agree(w, r, bound);
    }
  }
}

BOOST_AUTO_TEST_CASE(bf16_plans_agree_with_direct) {
  // bf16 plans that compute in f32, as on every AVX2 CPU (no bf16 kernels there), and on the
  // AVX-512 BF16 ones when asked to (`bf16_compute = "f32"`): both sides read the same bf16
  // values, so the outputs differ by f32 rounding plus each bf16 output's own rounding (2^-8).
  auto winograd = kiln_winograd("f32");
  if (!winograd) return;
  auto direct = direct_channels_last("f32");
  const Conv2dDesc d = square_conv(16, 24, 20, 3, 1, DType::bf16);
  struct Case {
    const char* what;
    OperandDtypes dtypes;
  };
  const Case cases[] = {{"all bf16", {DType::bf16, DType::bf16}},
                        {"mixed precision: f32 master weights and gradients", {DType::bf16, DType::f32}},
                        {"f32 inputs, read rounded to bf16", {DType::f32, DType::f32}}};
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      const ConvResults w = run_directions(*winograd, d, 19, Layout::nhwc, c.dtypes);
      const ConvResults r = run_directions(*direct, d, 19, Layout::nhwc, c.dtypes);
      BOOST_TEST_REQUIRE(!same_bits(w.y, r.y), "Winograd and direct gave the same bits: it did not run");
      BOOST_TEST_REQUIRE(!same_bits(w.dw, r.dw), "backward-filter did not run by Winograd");
      check_agree(w, r, c.dtypes.activations == DType::bf16 ? 8e-3 : 2e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(what_it_does_not_take_runs_direct) {
  auto winograd = kiln_winograd();
  if (!winograd) return;
  auto direct = direct_channels_last();
  // A bf16 plan that computes in bf16 (bf16 kernels in oneDNN: AVX-512 BF16 and up) is not one
  // of Kiln's Winograd's: its transforms compute in f32.
  if (winograd->device().detail.find("bf16: storage only") == std::string::npos) {
    const Conv2dDesc d = square_conv(16, 16, 20, 3, 1, DType::bf16);
    BOOST_TEST(same_bits(run_directions(*winograd, d, 13), run_directions(*direct, d, 13)));
  }
  // Strided; channels no multiple of 8; 1x1; too few output tiles (batch 2 at 7x7); wider than
  // measured (520 output channels, 128 tiles).
  for (const Conv2dDesc& d : {square_conv(32, 32, 20, 3, 2), square_conv(12, 20, 20, 3, 1),
                              square_conv(32, 32, 20, 1, 1), square_conv(64, 64, 7, 3, 1),
                              square_conv(8, 520, 32, 3, 1)}) {
    BOOST_TEST_CONTEXT("c " << d.c << " k " << d.k << " side " << d.h << " r " << d.r << " stride "
                            << d.stride_h << " " << dtype_name(d.dtype)) {
      BOOST_TEST(same_bits(run_directions(*winograd, d, 13), run_directions(*direct, d, 13)));
    }
  }
  // NCHW activations (tests pass them; the models pass channels-last) take the primitives too.
  const Conv2dDesc d = square_conv(16, 32, 20, 3, 1);
  BOOST_TEST(same_bits(run_directions(*winograd, d, 17, Layout::row_major),
                       run_directions(*direct, d, 17, Layout::row_major)));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
