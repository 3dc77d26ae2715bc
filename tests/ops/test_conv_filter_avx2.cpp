// The cpu backend's `conv_filter` option: convolution backward-filters by Kiln's AVX2 kernel
// (ops/conv_filter_avx2.hpp) agree with oneDNN's backward-weights primitive to f32 rounding, for
// pointwise convolutions (many rows: the roles swap inside the kernel), strided 1x1 and 3x3 ones
// with padding and odd sides, a stride-1 3x3 and a 5x5, Accumulate::yes and ::no; forward and
// backward-data are untouched (the same bits); shapes it does not fit (3 input channels, 24) keep
// oneDNN's, bit for bit; f16 plans and bf16 plans computed in f32 take it for their f32 master
// gradients, not for 16-bit ones; bf16 plans with bf16 kernels never. "auto" takes it exactly
// where the banner says; a wrong value is a config error. Runs on every CPU with AVX2, FMA and F16C
// (every CI machine): "kiln_avx2" forces the kernel there.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>

#include "conv_directions.hpp"
#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

BackendPtr cpu_with(const std::string& conv_filter, const std::string& bf16_compute = "auto") {
  // Channels-last convolutions and no Winograd, so the plans differ in the filter path only.
  return make_cpu_backend_with({{"conv_filter", conv_filter},
                                {"conv3x3", "direct"},
                                {"conv_layout", "channels_last"},
                                {"bf16_compute", bf16_compute}});
}

/// Forward and backward-data the same bits; dw within f32 rounding; the backward-filter ran the
/// kernel exactly where it takes the shape (the backend's path counters), and elsewhere the same
/// path as the oneDNN backend, with the same bits.
void check(const ConvResults& got, const ConvResults& want, bool taken, double bound = 2e-5) {
  BOOST_TEST(same_bits(got.y, want.y), "forward changed");
  BOOST_TEST(same_bits(got.dx, want.dx), "backward-data changed");
  BOOST_TEST(relative_difference(got.dw, want.dw) <= bound);
  BOOST_TEST(relative_difference(got.dw_added, want.dw_added) <= bound);
  BOOST_TEST(path_of(want, "backward_filter") != "kiln_avx2", "conv_filter = onednn ran the kernel");
  if (taken) {
    BOOST_TEST(path_of(got, "backward_filter") == "kiln_avx2");
  } else {
    BOOST_TEST(path_of(got, "backward_filter") == path_of(want, "backward_filter"));
    BOOST_TEST(same_bits(got.dw, want.dw), "the same path gave other bits");
    BOOST_TEST(same_bits(got.dw_added, want.dw_added), "the same path gave other bits");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv_filter_avx2)

BOOST_AUTO_TEST_CASE(kernel_and_onednn_agree) {
  auto kiln = cpu_with("kiln_avx2"), onednn = cpu_with("onednn");
  BOOST_TEST(kiln->device().detail.find("backward-filter by Kiln's AVX2 kernel") != std::string::npos);
  BOOST_TEST(onednn->device().detail.find("backward-filter by Kiln's AVX2 kernel") == std::string::npos);
  struct Case {
    Conv2dDesc d;
    bool taken;
  };
  const Case cases[] = {
      {conv(2, 64, 14, 256, 1, 1, 0), true},   // pointwise, few rows
      {conv(2, 256, 24, 64, 1, 1, 0), true},   // pointwise, 1152 rows: split, roles swapped
      {conv(2, 32, 28, 64, 1, 2, 0), true},    // strided 1x1: every other pixel
      {conv(2, 16, 33, 32, 3, 2, 1), true},    // strided 3x3 with padding, odd side
      {conv(2, 32, 13, 48, 3, 1, 1), true},    // stride-1 3x3
      {conv(2, 16, 36, 16, 5, 2, 2), true},    // 5x5, stride 2, padding 2
      {conv(2, 3, 32, 16, 7, 2, 3), false},    // 3 input channels (the stem): not a multiple of 16
      {conv(2, 24, 24, 32, 1, 1, 0), false},   // 24 channels
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("c " << c.d.c << " k " << c.d.k << " side " << c.d.h << " kernel " << c.d.r << " stride "
                            << c.d.stride_h) {
      check(run_directions(*kiln, c.d, 41), run_directions(*onednn, c.d, 41), c.taken);
    }
  }
}

BOOST_AUTO_TEST_CASE(sixteen_bit_plans_take_it_for_f32_gradients) {
  // f16 plans, and bf16 plans computed in f32 (forced here on every CPU): x and dy widened as the
  // kernel packs them, dw f32. A 16-bit dw keeps oneDNN's path.
  auto kiln = cpu_with("kiln_avx2", "f32"), onednn = cpu_with("onednn", "f32");
  for (const DType plan : {DType::f16, DType::bf16}) {
    for (const bool f32_grad : {true, false}) {
      for (const Conv2dDesc& d : {conv(2, 64, 14, 256, 1, 1, 0, plan), conv(2, 16, 33, 32, 3, 2, 1, plan)}) {
        BOOST_TEST_CONTEXT("plan " << dtype_name(plan) << " dw " << (f32_grad ? "f32" : "16-bit") << " kernel " << d.r) {
          const OperandDtypes dtypes{plan, plan, f32_grad ? DType::f32 : plan};
          check(run_directions(*kiln, d, 43, Layout::nhwc, dtypes), run_directions(*onednn, d, 43, Layout::nhwc, dtypes),
                f32_grad, f32_grad ? 2e-5 : 1.0 / 128);
        }
      }
    }
  }
  // bf16 plans with bf16 kernels (AVX-512 BF16 CPUs) compute in bf16: never the kernel.
  auto native = cpu_with("kiln_avx2"), native_onednn = cpu_with("onednn");
  if (native->device().detail.find("bf16: storage only") == std::string::npos) {
    const Conv2dDesc d = conv(2, 64, 14, 256, 1, 1, 0, DType::bf16);
    const OperandDtypes dtypes{DType::bf16, DType::bf16, DType::f32};
    check(run_directions(*native, d, 44, Layout::nhwc, dtypes), run_directions(*native_onednn, d, 44, Layout::nhwc, dtypes),
          false);
  }
}

BOOST_AUTO_TEST_CASE(auto_takes_it_where_the_banner_says) {
  auto automatic = make_cpu_backend_with({{"conv_filter", "auto"}, {"conv3x3", "direct"}, {"conv_layout", "channels_last"}});
  auto kiln = cpu_with("kiln_avx2"), onednn = cpu_with("onednn");
  const bool on = automatic->device().detail.find("backward-filter by Kiln's AVX2 kernel") != std::string::npos;
  BOOST_TEST_MESSAGE("conv_filter = auto runs Kiln's AVX2 backward-filter here: " << on);
  const Conv2dDesc d = conv(2, 16, 33, 32, 3, 2, 1);
  const ConvResults a = run_directions(*automatic, d, 45);
  BOOST_TEST(same_bits(a, run_directions(on ? *kiln : *onednn, d, 45)));
  BOOST_TEST((path_of(a, "backward_filter") == "kiln_avx2") == on, path_of(a, "backward_filter"));
}

BOOST_AUTO_TEST_CASE(an_unknown_mode_is_a_config_error) {
  const std::string msg = error_text<ConfigError>([&] { cpu_with("mkl"); });
  BOOST_TEST(msg.find("\"mkl\" is not a convolution filter mode") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
