// The cpu backend's `conv3x3` option with oneDNN's Winograd kernels (oneDNN 2.6 from AVX-512 up):
// f32-computing 3x3 convolutions agree with the direct ones to f32 rounding in all three
// directions, really run (their bits differ), are left alone where they do not pay
// (ops/conv2d.cpp, winograd_pays) or where oneDNN has none (strides, bf16 primitives), and an
// unknown mode is a config error. Both backends are built explicitly; where the loaded oneDNN has
// no Winograd (below AVX-512, or oneDNN 3.2) "winograd" means Kiln's own kernels
// (test_conv3x3_kiln_winograd.cpp tests those), so the oneDNN cases say they did not run. On every
// CPU, the path that runs is the one the banner names.
#include <boost/test/unit_test.hpp>

#include <string>

#include "conv_directions.hpp"
#include "cpu_fixture.hpp"
#include "kiln/backend.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

BackendPtr cpu_with(const std::string& conv3x3) { return make_cpu_backend_with("conv3x3", conv3x3); }

/// The backend with oneDNN's Winograd kernels, or null where the loaded oneDNN has none (below
/// AVX-512, or oneDNN 3.2), where "winograd" runs Kiln's own instead (the banner tells which).
BackendPtr onednn_winograd() {
  auto backend = cpu_with("winograd");
  const std::string detail = backend->device().detail;
  if (detail.find("3x3 convolutions by Winograd in f32 plans") != std::string::npos) return backend;
  BOOST_TEST(detail.find("3x3 convolutions by Kiln's Winograd in f32 plans") != std::string::npos, detail);
  BOOST_TEST_MESSAGE("the oneDNN loaded has no Winograd kernels on this CPU (below AVX-512, or oneDNN 3.2); not run here");
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv3x3_winograd)

BOOST_AUTO_TEST_CASE(winograd_agrees_with_direct_to_f32_rounding) {
  auto winograd = onednn_winograd();
  if (!winograd) return;
  auto direct = cpu_with("direct");
  BOOST_TEST(winograd->device().detail.find("3x3 convolutions by Winograd in f32 plans") != std::string::npos,
             winograd->device().detail);
  BOOST_TEST(direct->device().detail.find("Winograd") == std::string::npos, direct->device().detail);
  // ResNet-like layers Winograd takes (batch 2, at least 784 output positions): square and unequal
  // channel counts, an output side that is no multiple of the 4x4 tile; f16 plans compute in f32
  // and take it too.
  for (const Conv2dDesc& d :
       {square_conv(32, 16, 20, 3, 1), square_conv(16, 48, 21, 3, 1), square_conv(16, 16, 20, 3, 1, DType::f16)}) {
    BOOST_TEST_CONTEXT("c " << d.c << " k " << d.k << " side " << d.h << " " << dtype_name(d.dtype)) {
      const ConvResults w = run_directions(*winograd, d, 5), r = run_directions(*direct, d, 5);
      BOOST_TEST_REQUIRE(!same_bits(w.y, r.y), "Winograd and direct gave the same bits: it did not run");
      // F(4x4, 3x3)'s transforms scale values by up to ~10 before the products; in f32 that
      // leaves ~1e-6 of the largest output (f16 outputs: their own rounding, 2^-11, dominates).
      const double bound = d.dtype == DType::f16 ? 2e-3 : 2e-5;
      check_agree(w, r, bound);
    }
  }
}

BOOST_AUTO_TEST_CASE(nchw_tensors_and_widened_bf16_take_it_too) {
  // The edges reorder NCHW activations into the blocked layout as they do channels-last ones; a
  // bf16 plan told to compute in f32 (bf16_compute = "f32", the path of CPUs without bf16
  // kernels) computes in f32, so it runs by Winograd as well.
  auto winograd = onednn_winograd();
  if (!winograd) return;
  auto direct = cpu_with("direct");
  const auto widened = [](const std::string& conv3x3) {
    ParamMap params("backend");
    params.set("threads", std::int64_t{0}, "test");
    params.set("conv3x3", conv3x3, "test");
    params.set("bf16_compute", std::string("f32"), "test");
    return make_cpu_backend(params);
  };
  auto widened_winograd = widened("winograd"), widened_direct = widened("direct");
  const Conv2dDesc f32 = square_conv(16, 32, 20, 3, 1), bf16 = square_conv(16, 32, 20, 3, 1, DType::bf16);
  const struct {
    const char* what;
    ConvResults w, r;
    double bound;
  } cases[] = {
      {"f32 NCHW", run_directions(*winograd, f32, 3, Layout::row_major),
       run_directions(*direct, f32, 3, Layout::row_major), 2e-5},
      // bf16 outputs: their own rounding (2^-8 relative) is all that can differ.
      {"bf16 widened", run_directions(*widened_winograd, bf16, 3), run_directions(*widened_direct, bf16, 3), 1e-2},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      BOOST_TEST_REQUIRE(!same_bits(c.w.y, c.r.y), "Winograd and direct gave the same bits: it did not run");
      check_agree(c.w, c.r, c.bound);
    }
  }
}

BOOST_AUTO_TEST_CASE(other_convolutions_stay_direct) {
  auto winograd = onednn_winograd();
  if (!winograd) return;
  auto direct = cpu_with("direct");
  // Strided (no Winograd kernel), channels not in blocks of 16, too few output positions (batch 2
  // at 14x14 with 32 channels, at 7x7 even with 512: slower there), 1x1, and a bf16 plan on bf16
  // primitives (oneDNN has no bf16 Winograd kernel; this backend is on AVX-512, where
  // bf16_compute = "auto" gives bf16 primitives).
  for (const Conv2dDesc& d : {square_conv(32, 32, 20, 3, 2), square_conv(12, 20, 20, 3, 1),
                              square_conv(32, 32, 14, 3, 1), square_conv(512, 512, 7, 3, 1),
                              square_conv(32, 32, 20, 1, 1), square_conv(32, 32, 20, 3, 1, DType::bf16)}) {
    BOOST_TEST_CONTEXT("c " << d.c << " k " << d.k << " side " << d.h << " r " << d.r << " stride "
                            << d.stride_h << " " << dtype_name(d.dtype)) {
      BOOST_TEST(same_bits(run_directions(*winograd, d, 9), run_directions(*direct, d, 9)));
    }
  }
}

BOOST_AUTO_TEST_CASE(auto_is_onednn_winograd_from_avx512_up_and_kiln_winograd_below) {
  const bool onednn = onednn_winograd() != nullptr;
  const std::string automatic = cpu_with("auto")->device().detail;
  const char* expected = onednn ? "3x3 convolutions by Winograd in f32 plans" : "3x3 convolutions by Kiln's Winograd";
  BOOST_TEST(automatic.find(expected) != std::string::npos, automatic);
}

BOOST_AUTO_TEST_CASE(the_path_that_runs_is_the_one_the_banner_names) {
  // A 3x3 layer where both Winograds pay (ResNet-50's first stage at batch 2). With oneDNN 3.2 on
  // an AVX-512 CPU the banner once said "by Winograd" while every call ran direct.
  // A CPU with neither kernel runs "auto" direct (and refuses "winograd", tested elsewhere).
  const Conv2dDesc d = square_conv(64, 64, 56, 3, 1);
  for (const char* mode : {"auto", "winograd"}) {
    BOOST_TEST_CONTEXT("conv3x3 = " << mode) {
      auto backend = cpu_with(mode);
      const std::string detail = backend->device().detail;
      const bool onednn = detail.find("3x3 convolutions by Winograd in f32 plans") != std::string::npos;
      const bool kiln = detail.find("3x3 convolutions by Kiln's Winograd in f32 plans") != std::string::npos;
      const std::string expected = onednn ? "onednn_winograd" : kiln ? "kiln_winograd" : "onednn";
      const ConvResults r = run_directions(*backend, d, 21);
      for (const char* direction : {"forward", "backward_data", "backward_filter"}) {
        BOOST_TEST(path_of(r, direction) == expected, direction << ", banner: " << detail);
      }
      if (!onednn && !kiln) break;
    }
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_mode_is_a_config_error) {
  const std::string msg = error_text<ConfigError>([&] { cpu_with("fft"); });
  BOOST_TEST(msg.find("\"fft\" is not a 3x3 convolution algorithm") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
