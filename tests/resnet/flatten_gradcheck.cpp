// Finite-difference gradient checks of the SDK's Flatten on the real cpu backend (method:
// gradcheck.hpp), from both layouts: its output must be PyTorch's (C, H, W) order whatever the
// input's bytes, and its gradient must come back in the input's layout.
#include <boost/test/unit_test.hpp>

#include <random>

#include "gradcheck.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::DType;
using kiln::Layout;
using kiln::Shape;
using kiln::Tensor;
using kiln::nn::ImageShape;
using kiln::test::check_gradient;
using kiln::test::cpu;
using kiln::test::device_f32;
using kiln::test::dot;
using kiln::test::random_values;
using kiln::test::read;

/// Flatten of x (logical values v) in `layout`: y is v in NCHW order, dx = dy in x's layout.
void check_flatten(Layout layout) {
  constexpr std::int64_t B = 2, C = 3, H = 2, W = 4, F = C * H * W;
  kiln::nn::Flatten flatten;
  BOOST_TEST(flatten.build(cpu(), B, ImageShape{C, H, W}, DType::f32) == F);
  const auto v = random_values(B * F, 21);
  const Tensor x = device_f32({B, C, H, W}, v, layout);
  const Tensor y = flatten.forward(x);
  BOOST_TEST(y.shape() == (Shape{B, F}));
  BOOST_TEST((y.layout() == Layout::row_major));
  BOOST_TEST((y.data() == x.data()) == (layout == Layout::row_major));  // NCHW needs no copy
  const auto yv = read(y);
  for (std::size_t i = 0; i < v.size(); ++i) BOOST_TEST(yv[i] == v[i]);  // torch.flatten's order, exactly

  const std::vector<double> r = random_values(B * F, 22);
  const Tensor dx = flatten.backward(device_f32({B, F}, r));
  BOOST_TEST((dx.layout() == layout));
  auto loss = [&] { return dot(read(flatten.forward(x)), r); };
  check_gradient(std::string("flatten dx from ") + (layout == Layout::nhwc ? "nhwc" : "nchw"), x, read(dx), loss);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flatten, *boost::unit_test::precondition(kiln::test::cnn_ops_available))

BOOST_AUTO_TEST_CASE(flatten_nchw_is_a_view) { check_flatten(Layout::row_major); }

BOOST_AUTO_TEST_CASE(flatten_nhwc_rearranges_to_torch_order) { check_flatten(Layout::nhwc); }

BOOST_AUTO_TEST_SUITE_END()
