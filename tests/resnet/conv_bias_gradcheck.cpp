// Finite-difference gradient checks of the SDK's Conv2d with a bias, on the real cpu backend
// (method: gradcheck.hpp), and its two init schemes. The cpu backend writes channels-last
// activations; a wrapper that reports row_major as its activation layout also runs Conv2d's NCHW
// bias path (the one the cuda backend takes in f32).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "gradcheck.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::Backend;
using kiln::DType;
using kiln::Layout;
using kiln::Tensor;
using kiln::nn::ImageShape;
using kiln::nn::Window;
using kiln::test::check_gradient;
using kiln::test::cpu;
using kiln::test::device_f32;
using kiln::test::dot;
using kiln::test::random_values;
using kiln::test::read;

/// The cpu backend with NCHW activations.
class NchwCpu final : public kiln::test::ForwardingBackend {
 public:
  NchwCpu() : ForwardingBackend(cpu()) {}
  std::string_view name() const override { return "cpu-nchw"; }
  Layout activation_layout(DType) const override { return Layout::row_major; }
};

/// Builds a biased 3x3 stride-2 pad-1 Conv2d on `backend`, checks y = conv(x) + b against a double
/// reference, then dx, dW and db by finite differences with dy in `dy_layout`.
void check_biased_conv(Backend& backend, Layout dy_layout, const std::string& what) {
  constexpr std::int64_t B = 2, C = 3, H = 5, W = 4, K = 4, P = 3, Q = 2;
  kiln::nn::ParameterStore store;
  kiln::nn::Conv2d conv(store, "conv", C, K, Window{3, 2, 1}, kiln::nn::ConvInit::pytorch_default,
                        kiln::nn::ConvBias::learned);
  store.allocate(backend, DType::f32, DType::f32, 11);
  BOOST_TEST_REQUIRE(conv.has_bias());
  BOOST_TEST((conv.build(backend, B, ImageShape{C, H, W}, DType::f32) == ImageShape{K, P, Q}));
  const auto& bias = store[conv.bias_index()];
  BOOST_TEST(bias.name == "conv.bias");
  BOOST_TEST(bias.flags == kiln::kParamNoWeightDecay);

  const Tensor x = device_f32({B, C, H, W}, random_values(B * C * H * W, 12));
  const auto xv = read(x), wv = read(store[conv.weight_index()].value), bv = read(bias.value);
  const auto y = read(conv.forward(x));
  for (std::int64_t n = 0; n < B; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t p = 0; p < P; ++p)
        for (std::int64_t q = 0; q < Q; ++q) {
          double want = bv[static_cast<std::size_t>(k)];
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t r = 0; r < 3; ++r)
              for (std::int64_t s = 0; s < 3; ++s) {
                const std::int64_t ih = p * 2 - 1 + r, iw = q * 2 - 1 + s;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                want += xv[static_cast<std::size_t>(((n * C + c) * H + ih) * W + iw)] *
                        wv[static_cast<std::size_t>(((k * C + c) * 3 + r) * 3 + s)];
              }
          BOOST_TEST(y[static_cast<std::size_t>(((n * K + k) * P + p) * Q + q)] == want,
                     what << " y[" << n << "," << k << "," << p << "," << q << "]"
                          << boost::test_tools::tolerance(1e-5));
        }

  const std::vector<double> r = random_values(B * K * P * Q, 13);
  const Tensor dy = device_f32({B, K, P, Q}, r, dy_layout);
  auto loss = [&] { return dot(read(conv.forward(x)), r); };
  store.zero_grads(backend);
  conv.forward(x);
  const auto dx = read(conv.backward(dy));
  const auto dw = read(store[conv.weight_index()].grad);
  const auto db = read(bias.grad);
  // db[k] is dy summed over (B, P, Q): exact enough to compare directly, then by differences.
  for (std::int64_t k = 0; k < K; ++k) {
    double sum = 0;
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t j = 0; j < P * Q; ++j) sum += r[static_cast<std::size_t>((n * K + k) * P * Q + j)];
    BOOST_TEST(db[static_cast<std::size_t>(k)] == sum, what << " db[" << k << "]" << boost::test_tools::tolerance(1e-5));
  }
  check_gradient(what + " dx", x, dx, loss);
  check_gradient(what + " dW", store[conv.weight_index()].value, dw, loss);
  check_gradient(what + " db", bias.value, db, loss);
  // Parameter gradients accumulate: a second backward doubles db.
  conv.forward(x);
  conv.backward(dy);
  const auto db2 = read(bias.grad);
  for (std::size_t i = 0; i < db.size(); ++i) BOOST_TEST(db2[i] == 2 * db[i], boost::test_tools::tolerance(1e-5));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv2d_bias, *boost::unit_test::precondition(kiln::test::cnn_ops_available))

BOOST_AUTO_TEST_CASE(conv2d_bias_channels_last) {
  check_biased_conv(cpu(), Layout::nhwc, "channels-last conv, nhwc dy");
  check_biased_conv(cpu(), Layout::row_major, "channels-last conv, nchw dy");
}

BOOST_AUTO_TEST_CASE(conv2d_bias_nchw) {
  NchwCpu nchw;
  check_biased_conv(nchw, Layout::row_major, "nchw conv");
}

BOOST_AUTO_TEST_CASE(conv2d_init_schemes) {
  // PyTorch's default: W and b uniform in +-1/sqrt(C k k); kaiming fan_out: N(0, sqrt(2 / (K k k))), b = 0.
  constexpr std::int64_t C = 8, K = 16, k = 3;
  kiln::nn::ParameterStore store;
  kiln::nn::Conv2d torch_default(store, "a", C, K, Window{k, 1, 1}, kiln::nn::ConvInit::pytorch_default,
                                 kiln::nn::ConvBias::learned);
  kiln::nn::Conv2d kaiming(store, "b", C, K, Window{k, 1, 1}, kiln::nn::ConvInit::kaiming_normal_fan_out_relu,
                           kiln::nn::ConvBias::learned);
  kiln::nn::Conv2d plain(store, "c", C, K, Window{k, 1, 1}, kiln::nn::ConvInit::pytorch_default);
  BOOST_TEST(!plain.has_bias());
  BOOST_TEST(store.parameters().size() == 5u);  // a.weight, a.bias, b.weight, b.bias, c.weight
  store.allocate(cpu(), DType::f32, DType::f32, 5);
  const double bound = 1.0 / std::sqrt(double{C * k * k});
  for (const std::size_t i : {torch_default.weight_index(), torch_default.bias_index()}) {
    const auto v = read(store[i].value);
    double max_abs = 0, sq = 0;
    for (double e : v) {
      max_abs = std::max(max_abs, std::abs(e));
      sq += e * e;
    }
    BOOST_TEST(max_abs <= bound, store[i].name);
    if (v.size() > 100) {  // the weight: a uniform's std is bound / sqrt(3)
      BOOST_TEST(std::sqrt(sq / static_cast<double>(v.size())) == bound / std::sqrt(3.0), boost::test_tools::tolerance(0.1));
    }
  }
  const auto w = read(store[kaiming.weight_index()].value);
  double sq = 0;
  for (double e : w) sq += e * e;
  BOOST_TEST(std::sqrt(sq / static_cast<double>(w.size())) == std::sqrt(2.0 / (K * k * k)), boost::test_tools::tolerance(0.1));
  for (double e : read(store[kaiming.bias_index()].value)) BOOST_TEST(e == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
