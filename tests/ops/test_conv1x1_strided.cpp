// The backward-data of strided 1x1 convolutions (ResNet's projection shortcuts) as one dense matmul
// and a pass over dx (ops/conv1x1_matmul.hpp, StridedPointwiseBackwardData), which the cpu
// backend's `conv1x1` route takes for f32 plans with few output pixels: it agrees with oneDNN's
// convolution to f32 rounding, including dx's pixels off the stride (zeros) over a poisoned dx,
// and leaves forward and backward-filter untouched (the same bits). Shapes it does not take keep
// the convolution, bit for bit: inputs not exactly stride x the output (an odd side), many output
// pixels, 16-bit plans.
#include <boost/test/unit_test.hpp>

#include <string>

#include "conv_directions.hpp"
#include "cpu_fixture.hpp"

namespace kiln::test {
namespace {

BackendPtr cpu_with(const std::string& conv1x1) {
  return make_cpu_backend_with({{"conv1x1", conv1x1},
                                {"conv_filter", "onednn"},
                                {"conv_direct", "onednn"},
                                {"conv_layout", "channels_last"}});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv1x1_strided)

BOOST_AUTO_TEST_CASE(dense_matmul_and_convolution_agree) {
  auto matmul = cpu_with("matmul"), convolution = cpu_with("conv");
  struct Case {
    Conv2dDesc d;
    bool taken;
  };
  const Case cases[] = {
      {conv(2, 32, 28, 1024, 1, 2, 0), true},   // 392 output pixels
      {conv(3, 48, 14, 16, 1, 2, 0), true},     // K < C
      {conv(1, 16, 24, 512, 1, 3, 0), true},    // stride 3: two of every three rows and columns zero
      {conv(2, 16, 15, 32, 1, 2, 0), false},    // 15 is not 2 x 8
      {conv(2, 16, 100, 16, 1, 2, 0), false},   // 5000 output pixels
      {conv(2, 32, 28, 64, 1, 2, 0, DType::f16), false},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("n " << c.d.n << " c " << c.d.c << " k " << c.d.k << " side " << c.d.h << " stride "
                            << c.d.stride_h << " " << dtype_name(c.d.dtype)) {
      const ConvResults got = run_directions(*matmul, c.d, 61), want = run_directions(*convolution, c.d, 61);
      BOOST_TEST(relative_difference(got.dx, want.dx) <= 2e-5);
      BOOST_TEST(path_of(want, "backward_data") != "strided_matmul", "conv1x1 = conv ran the dense matmul");
      if (c.taken) {
        BOOST_TEST(path_of(got, "backward_data") == "strided_matmul");
      } else {
        BOOST_TEST(path_of(got, "backward_data") == path_of(want, "backward_data"));
        BOOST_TEST(same_bits(got.dx, want.dx), "the same path gave other bits");
      }
      BOOST_TEST(same_bits(got.y, want.y), "forward changed");
      BOOST_TEST(same_bits(got.dw, want.dw), "backward-filter changed");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
