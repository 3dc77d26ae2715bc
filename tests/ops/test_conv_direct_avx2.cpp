// The cpu backend's `conv_direct` option: forward and backward-data by Kiln's AVX2 direct
// convolution (ops/conv_direct_avx2.hpp) agree with oneDNN's primitives to f32 rounding, for
// strided 3x3s with padding and odd sides (backward-data: dx pixels in stride x stride parity
// classes), a 3x3 whose small output is mostly border (taps in the padding skipped), a 5x5 of
// stride 2, a 2x2 of stride 3 (a parity class no tap reaches: its dx is zeros), a shape with no
// two sides alike, more than 256 channels, and unequal channel counts; the backward-filter is
// untouched (the same bits). Shapes it does not take keep oneDNN's, bit for bit: 1x1s (where it
// does not pay), 24 channels. f16 plans and bf16 plans computed in f32 take it (widened, rounded
// back), bf16 plans with bf16 kernels never. "auto" takes it exactly where the banner says; a
// wrong value is a config error. Runs on every CPU with AVX2 and FMA (every CI machine):
// "kiln_avx2" forces the kernel there.
#include <boost/test/unit_test.hpp>

#include <string>

#include "conv_directions.hpp"
#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

constexpr const char* kBanner = "forward and backward-data by Kiln's AVX2 kernel";

BackendPtr cpu_with(const std::string& conv_direct) {
  // Channels-last convolutions, no Winograd and oneDNN's backward-filter on both sides, so the
  // plans differ in the forward and backward-data path only.
  return make_cpu_backend_with({{"conv_direct", conv_direct},
                                {"conv3x3", "direct"},
                                {"conv_filter", "onednn"},
                                {"conv_layout", "channels_last"}});
}

/// y and dx within f32 rounding, the backward-filter the same bits; forward and backward-data ran
/// the kernel exactly where it takes the shape (the backend's path counters: the kernel and
/// oneDNN may sum in the same order and give the same bits, so bits cannot tell), and elsewhere
/// the oneDNN backend's path, with its bits.
void check(const ConvResults& got, const ConvResults& want, bool taken) {
  BOOST_TEST_MESSAGE("difference relative to the largest |value|: y " << relative_difference(got.y, want.y) << ", dx "
                                                                      << relative_difference(got.dx, want.dx));
  BOOST_TEST(relative_difference(got.y, want.y) <= 2e-5);
  BOOST_TEST(relative_difference(got.dx, want.dx) <= 2e-5);
  BOOST_TEST(same_bits(got.dw, want.dw), "backward-filter changed");
  BOOST_TEST(same_bits(got.dw_added, want.dw_added), "accumulated backward-filter changed");
  for (const char* direction : {"forward", "backward_data"}) {
    BOOST_TEST_CONTEXT(direction) {
      BOOST_TEST(path_of(want, direction) != "kiln_avx2", "conv_direct = onednn ran the kernel");
      BOOST_TEST(path_of(got, direction) == (taken ? std::string("kiln_avx2") : path_of(want, direction)));
    }
  }
  if (!taken) BOOST_TEST((same_bits(got.y, want.y) && same_bits(got.dx, want.dx)), "the same path gave other bits");
}

/// Nothing square: a 13x9 input, a 3x5 kernel, stride 2 down and 1 across, padding 1 and 2.
Conv2dDesc rectangular() {
  Conv2dDesc d = conv(2, 16, 13, 32, 3, 2, 1);
  d.w = 9, d.s = 5, d.stride_w = 1, d.pad_w = 2;
  return d;
}

/// How many 16-bit values of a and b differ.
std::int64_t differing(const Tensor& a, const Tensor& b) {
  const auto* x = static_cast<const std::uint16_t*>(a.data());
  const auto* y = static_cast<const std::uint16_t*>(b.data());
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) n += x[i] != y[i];
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv_direct_avx2)

BOOST_AUTO_TEST_CASE(kernel_and_onednn_agree) {
  auto kiln = cpu_with("kiln_avx2"), onednn = cpu_with("onednn");
  BOOST_TEST(kiln->device().detail.find(kBanner) != std::string::npos);
  BOOST_TEST(onednn->device().detail.find(kBanner) == std::string::npos);
  struct Case {
    Conv2dDesc d;
    bool taken;
  };
  const Case cases[] = {
      {conv(2, 16, 33, 32, 3, 2, 1), true},   // strided 3x3, padding, odd side: 4 unequal parity classes
      {conv(2, 32, 14, 16, 3, 2, 1), true},   // strided 3x3, even side, K < C
      {conv(3, 48, 7, 32, 3, 1, 1), true},    // 3x3 on 7x7: 27 of 49 pixels touch the padding
      {conv(2, 16, 36, 16, 5, 2, 2), true},   // 5x5, stride 2, padding 2
      // 2x2, stride 3: rows and columns 2, 5, 8 get no tap. Every other dx pixel gets one tap, a
      // single sum over k that only differs from oneDNN's in order with more than 256 channels.
      {conv(2, 16, 11, 288, 2, 3, 0), true},
      {conv(1, 272, 9, 288, 3, 2, 1), true},  // over 256 channels: each tap's reduction in two blocks
      {rectangular(), true},                  // 13x9 input, 3x5 kernel, strides 2 and 1, paddings 1 and 2
      {conv(2, 32, 28, 64, 1, 2, 0), false},  // strided 1x1: does not pay
      {conv(2, 24, 24, 32, 3, 2, 1), false},  // 24 channels: not a multiple of 16
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("n " << c.d.n << " c " << c.d.c << " k " << c.d.k << " input " << c.d.h << "x" << c.d.w
                            << " kernel " << c.d.r << "x" << c.d.s << " stride " << c.d.stride_h << "," << c.d.stride_w) {
      check(run_directions(*kiln, c.d, 51), run_directions(*onednn, c.d, 51), c.taken);
    }
  }
}

BOOST_AUTO_TEST_CASE(sixteen_bit_plans_computed_in_f32_take_it) {
  // f16 plans, and bf16 plans computed in f32 (forced here on every CPU): x (dy) and w widened,
  // the f32 result rounded to the plan's dtype, as oneDNN's edges do. The outputs are 16-bit, so
  // the two agree within one rounding of them (2^-8 of the largest for bf16, 2^-11 for f16).
  auto kiln = make_cpu_backend_with({{"conv_direct", "kiln_avx2"}, {"conv3x3", "direct"}, {"conv_filter", "onednn"},
                                     {"conv_layout", "channels_last"}, {"bf16_compute", "f32"}});
  auto onednn = make_cpu_backend_with({{"conv_direct", "onednn"}, {"conv3x3", "direct"}, {"conv_filter", "onednn"},
                                       {"conv_layout", "channels_last"}, {"bf16_compute", "f32"}});
  for (const DType plan : {DType::f16, DType::bf16}) {
    BOOST_TEST_CONTEXT("plan " << dtype_name(plan)) {
      // 262144 outputs: a sum order's ~1e-7 changes a bf16 rounding rarely (39 values here, 661
      // for f16), so the message's counts of differing values mean something only this large.
      const Conv2dDesc d = conv(4, 64, 63, 64, 3, 2, 1, plan);
      const ConvResults got = run_directions(*kiln, d, 52), want = run_directions(*onednn, d, 52);
      const double bound = plan == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
      BOOST_TEST(relative_difference(got.y, want.y) <= bound);
      BOOST_TEST(relative_difference(got.dx, want.dx) <= bound);
      BOOST_TEST_MESSAGE("differing y " << differing(got.y, want.y) << " of " << got.y.numel() << ", dx " << differing(got.dx, want.dx));
      BOOST_TEST(path_of(got, "forward") == "kiln_avx2");
      BOOST_TEST(path_of(got, "backward_data") == "kiln_avx2");
      BOOST_TEST(same_bits(got.dw, want.dw), "backward-filter changed");
    }
  }
  // bf16 plans with bf16 kernels (AVX-512 BF16 CPUs) compute in bf16: never the kernel.
  auto native = cpu_with("kiln_avx2"), native_onednn = cpu_with("onednn");
  if (native->device().detail.find("bf16: storage only") == std::string::npos) {
    const Conv2dDesc d = conv(2, 32, 15, 48, 3, 2, 1, DType::bf16);
    const ConvResults got = run_directions(*native, d, 55);
    BOOST_TEST(same_bits(got, run_directions(*native_onednn, d, 55)));
    BOOST_TEST(path_of(got, "forward") == "onednn");
    BOOST_TEST(path_of(got, "backward_data") == "onednn");
  }
}

BOOST_AUTO_TEST_CASE(auto_takes_it_where_the_banner_says) {
  auto automatic = make_cpu_backend_with(
      {{"conv_direct", "auto"}, {"conv3x3", "direct"}, {"conv_filter", "onednn"}, {"conv_layout", "channels_last"}});
  auto kiln = cpu_with("kiln_avx2"), onednn = cpu_with("onednn");
  const bool on = automatic->device().detail.find(kBanner) != std::string::npos;
  BOOST_TEST_MESSAGE("conv_direct = auto runs Kiln's AVX2 direct convolution here: " << on);
  const Conv2dDesc d = conv(2, 16, 33, 32, 3, 2, 1);
  const ConvResults a = run_directions(*automatic, d, 54);
  BOOST_TEST(same_bits(a, run_directions(on ? *kiln : *onednn, d, 54)));
  BOOST_TEST((path_of(a, "forward") == "kiln_avx2") == on, path_of(a, "forward"));
  BOOST_TEST((path_of(a, "backward_data") == "kiln_avx2") == on, path_of(a, "backward_data"));
}

BOOST_AUTO_TEST_CASE(an_unknown_mode_is_a_config_error) {
  const std::string msg = error_text<ConfigError>([&] { cpu_with("mkl"); });
  BOOST_TEST(msg.find("\"mkl\" is not a direct convolution mode") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
