// Finite-difference gradient checks of the CNN layers on the real cpu backend: Conv2d (stride,
// padding), BatchNorm2d (train mode, plus the running-stat rule and eval mode), MaxPool2d,
// GlobalAvgPool and a Bottleneck / BasicBlock with downsample, on tiny shapes. Forward values
// are also checked against double references written here. Method: gradcheck.hpp.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "gradcheck.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/nn/cnn_layers.hpp"
#include "blocks.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::Shape;
using kiln::Tensor;
using kiln::nn::ImageShape;
using kiln::nn::Window;
using kiln::test::check_gradient;
using kiln::test::cpu;
using kiln::test::device_f32;
using kiln::test::dot;
using kiln::test::random_values;
using kiln::test::read;

std::vector<double> grad_of(const kiln::nn::ParameterStore& store, std::size_t i) { return read(store[i].grad); }

}  // namespace

BOOST_AUTO_TEST_SUITE(cnn_layers, *boost::unit_test::precondition(kiln::test::cnn_ops_available))

BOOST_AUTO_TEST_CASE(conv2d_stride_padding_forward_and_gradients) {
  constexpr std::int64_t B = 2, C = 3, H = 5, W = 6, K = 4;
  kiln::nn::ParameterStore store;
  kiln::nn::Conv2d conv(store, "conv", C, K, Window{3, 2, 1}, kiln::nn::ConvInit::kaiming_normal_fan_out_relu);
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 3);
  const ImageShape out = conv.build(cpu(), B, ImageShape{C, H, W}, kiln::DType::f32);
  BOOST_TEST((out == ImageShape{K, 3, 3}));
  BOOST_TEST(store[conv.weight_index()].name == "conv.weight");
  BOOST_TEST(store[conv.weight_index()].value.shape() == (Shape{K, C, 3, 3}));

  const Tensor x = device_f32({B, C, H, W}, random_values(B * C * H * W, 1));
  const auto xv = read(x), wv = read(store[0].value), y = read(conv.forward(x));
  for (std::int64_t n = 0; n < B; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t p = 0; p < 3; ++p)
        for (std::int64_t q = 0; q < 3; ++q) {
          double want = 0;
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t r = 0; r < 3; ++r)
              for (std::int64_t s = 0; s < 3; ++s) {
                const std::int64_t ih = p * 2 - 1 + r, iw = q * 2 - 1 + s;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                want += xv[((n * C + c) * H + ih) * W + iw] * wv[((k * C + c) * 3 + r) * 3 + s];
              }
          BOOST_TEST(y[((n * K + k) * 3 + p) * 3 + q] == want, boost::test_tools::tolerance(1e-5));
        }

  const std::vector<double> r = random_values(B * K * 9, 2);
  const Tensor dy = device_f32({B, K, 3, 3}, r);
  auto loss = [&] { return dot(read(conv.forward(x)), r); };
  store.zero_grads(cpu());
  conv.forward(x);
  const auto dx = read(conv.backward(dy));
  const auto dw = grad_of(store, 0);
  check_gradient("conv dx", x, dx, loss);
  check_gradient("conv dW", store[0].value, dw, loss);
  // Accumulation: a second backward adds the same dW again.
  conv.forward(x);
  conv.backward(dy);
  const auto dw2 = grad_of(store, 0);
  for (std::size_t i = 0; i < dw.size(); ++i) BOOST_TEST(dw2[i] == 2 * dw[i], boost::test_tools::tolerance(1e-5));
  // Shape errors name the layer and what it was built for.
  const Tensor wrong = device_f32({B, C, H, H}, random_values(B * C * H * H, 3));
  BOOST_TEST(kiln::test::error_text<kiln::BackendError>([&] { conv.forward(wrong); }) ==
             "Conv2d 'conv': input is f32(2, 3, 5, 5), expected (B, 3, 5, 6) with 1 <= B <= 2; build the "
             "layer for this shape");
}

BOOST_AUTO_TEST_CASE(conv2d_stem_skips_input_gradient_and_kaiming_init) {
  kiln::nn::ParameterStore store;
  kiln::nn::Conv2d conv(store, "stem", 3, 64, Window{7, 2, 3}, kiln::nn::ConvInit::kaiming_normal_fan_out_relu,
                        kiln::nn::ConvBias::none, kiln::nn::InputGrad::skip);
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 9);
  conv.build(cpu(), 1, ImageShape{3, 32, 32}, kiln::DType::f32);
  const auto w = read(store[0].value);
  double sq = 0;
  for (double v : w) sq += v * v;
  const double want_std = std::sqrt(2.0 / (64 * 49));  // fan_out
  BOOST_TEST(std::sqrt(sq / static_cast<double>(w.size())) == want_std, boost::test_tools::tolerance(0.05));
  const Tensor x = device_f32({1, 3, 32, 32}, random_values(3 * 32 * 32, 4));
  conv.forward(x);
  const Tensor dy = device_f32({1, 64, 16, 16}, random_values(64 * 256, 5));
  BOOST_TEST(!conv.backward(dy).defined());
}

BOOST_AUTO_TEST_CASE(batchnorm2d_train_gradients_running_stats_and_eval) {
  constexpr std::int64_t B = 3, C = 2, H = 3, W = 2;
  kiln::nn::ParameterStore store;
  kiln::nn::BatchNorm2d bn(store, "bn", C);
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 3);
  bn.build(cpu(), B, ImageShape{C, H, W}, kiln::DType::f32);
  BOOST_TEST(store[bn.weight_index()].flags == kiln::kParamNoWeightDecay);
  BOOST_TEST(store[bn.bias_index()].flags == kiln::kParamNoWeightDecay);
  BOOST_TEST(bn.buffers().at(0).name == "bn.running_mean");
  BOOST_TEST(bn.buffers().at(1).name == "bn.running_var");
  kiln::test::write(store[0].value, {1.5, -0.7});
  kiln::test::write(store[1].value, {0.2, 0.4});

  const auto xv = random_values(B * C * H * W, 6, -2, 3);
  const Tensor x = device_f32({B, C, H, W}, xv);
  const auto y = read(bn.forward(x, kiln::Mode::train));
  // Reference: batch statistics per channel, biased variance for normalising, unbiased for the
  // running variance, momentum 0.1 from (0, 1).
  const double gamma[] = {1.5, -0.7}, beta[] = {0.2, 0.4};
  const auto rm = read(bn.buffers()[0].value), rv = read(bn.buffers()[1].value);
  const double m = B * H * W;
  for (std::int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t i = 0; i < H * W; ++i) mean += xv[(n * C + c) * H * W + i];
    mean /= m;
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t i = 0; i < H * W; ++i) var += std::pow(xv[(n * C + c) * H * W + i] - mean, 2);
    var /= m;
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t i = 0; i < H * W; ++i) {
        const std::size_t j = static_cast<std::size_t>((n * C + c) * H * W + i);
        BOOST_TEST(y[j] == gamma[c] * (xv[j] - mean) / std::sqrt(var + 1e-5) + beta[c],
                   boost::test_tools::tolerance(1e-4));
      }
    BOOST_TEST(rm[c] == 0.1 * mean, boost::test_tools::tolerance(1e-4));
    BOOST_TEST(rv[c] == 0.9 + 0.1 * var * m / (m - 1), boost::test_tools::tolerance(1e-4));
  }

  const std::vector<double> r = random_values(B * C * H * W, 7);
  const Tensor dy = device_f32({B, C, H, W}, r);
  auto loss = [&] { return dot(read(bn.forward(x, kiln::Mode::train)), r); };
  store.zero_grads(cpu());
  bn.forward(x, kiln::Mode::train);
  const auto dx = read(bn.backward(dy));
  check_gradient("bn dx", x, dx, loss);
  check_gradient("bn dgamma", store[0].value, grad_of(store, 0), loss);
  check_gradient("bn dbeta", store[1].value, grad_of(store, 1), loss);

  // Eval mode normalises with the running statistics.
  const auto rm2 = read(bn.buffers()[0].value), rv2 = read(bn.buffers()[1].value);
  const auto ye = read(bn.forward(x, kiln::Mode::eval));
  for (std::int64_t n = 0; n < B; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t i = 0; i < H * W; ++i) {
        const std::size_t j = static_cast<std::size_t>((n * C + c) * H * W + i);
        BOOST_TEST(ye[j] == gamma[c] * (xv[j] - rm2[c]) / std::sqrt(rv2[c] + 1e-5) + beta[c],
                   boost::test_tools::tolerance(1e-4));
      }
  BOOST_TEST(kiln::test::error_text<kiln::BackendError>([&] { bn.backward(dy); }) ==
             "BatchNorm2d 'bn': backward() needs a Mode::train forward() first");
}

BOOST_AUTO_TEST_CASE(maxpool2d_forward_and_gradient_away_from_ties) {
  constexpr std::int64_t B = 2, C = 2, H = 6, W = 5;
  kiln::nn::MaxPool2d pool(Window{3, 2, 1});
  const ImageShape out = pool.build(cpu(), B, ImageShape{C, H, W}, kiln::DType::f32);
  BOOST_TEST((out == ImageShape{C, 3, 3}));
  // Distinct values 0.05 apart (a shuffled ramp): no two window elements come within the
  // finite-difference step of each other, so no element sits on a tie (the max-pool kink).
  std::vector<double> xv(B * C * H * W);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(-3.0 + 0.05 * static_cast<double>(i));
  std::shuffle(xv.begin(), xv.end(), std::mt19937(8));
  const Tensor x = device_f32({B, C, H, W}, xv);
  const auto y = read(pool.forward(x));
  for (std::int64_t n = 0; n < B * C; ++n)
    for (std::int64_t p = 0; p < 3; ++p)
      for (std::int64_t q = 0; q < 3; ++q) {
        double want = -1e30;
        for (std::int64_t r = 0; r < 3; ++r)
          for (std::int64_t s = 0; s < 3; ++s) {
            const std::int64_t ih = 2 * p - 1 + r, iw = 2 * q - 1 + s;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) want = std::max(want, xv[(n * H + ih) * W + iw]);
          }
        BOOST_TEST(y[(n * 3 + p) * 3 + q] == want);
      }
  const std::vector<double> r = random_values(B * C * 9, 9);
  const Tensor dy = device_f32({B, C, 3, 3}, r);
  auto loss = [&] { return dot(read(pool.forward(x)), r); };
  pool.forward(x);
  check_gradient("maxpool dx", x, read(pool.backward(dy)), loss);
}

BOOST_AUTO_TEST_CASE(global_avgpool_forward_and_gradient) {
  constexpr std::int64_t B = 2, C = 3, H = 4, W = 3;
  kiln::nn::GlobalAvgPool pool;
  BOOST_TEST(pool.build(cpu(), B, ImageShape{C, H, W}, kiln::DType::f32) == C);
  const auto xv = random_values(B * C * H * W, 10);
  const Tensor x = device_f32({B, C, H, W}, xv);
  const auto y = read(pool.forward(x));
  for (std::int64_t i = 0; i < B * C; ++i) {
    const double want = std::accumulate(xv.begin() + i * H * W, xv.begin() + (i + 1) * H * W, 0.0) / (H * W);
    BOOST_TEST(y[static_cast<std::size_t>(i)] == want, boost::test_tools::tolerance(1e-5));
  }
  const std::vector<double> r = random_values(B * C, 11);
  auto loss = [&] { return dot(read(pool.forward(x)), r); };
  pool.forward(x);
  check_gradient("avgpool dx", x, read(pool.backward(device_f32({B, C}, r))), loss);
}

namespace {

// Checks dx and every parameter gradient of a residual block in train mode; the ReLU kinks
// (inner ReLUs and the fused add+ReLU) are handled by gradcheck's two-step rule.
void check_block(kiln::resnet::ResidualBlock& block, kiln::nn::ParameterStore& store, ImageShape in,
                 std::int64_t batch, const std::string& what) {
  const ImageShape out = block.build(cpu(), batch, in, kiln::DType::f32);
  // A block is fed what the layer before it gives in a model: the backend's activation layout.
  const kiln::Layout layout = cpu().activation_layout(kiln::DType::f32);
  const Tensor x = device_f32({batch, in.c, in.h, in.w}, random_values(batch * in.c * in.h * in.w, 12, -2, 2), layout);
  const std::vector<double> r = random_values(batch * out.c * out.h * out.w, 13);
  const Tensor dy = device_f32({batch, out.c, out.h, out.w}, r, layout);
  auto loss = [&] { return dot(read(block.forward(x, kiln::Mode::train)), r); };

  // Non-trivial BN affine parameters so every path carries gradient.
  for (std::size_t i = 0; i < store.parameters().size(); ++i) {
    const auto& p = store[i];
    if (p.name.find("bn") != std::string::npos || p.name.find("downsample.1") != std::string::npos) {
      const bool gamma = p.name.ends_with(".weight");
      kiln::test::write(p.value, random_values(static_cast<std::size_t>(p.value.numel()), 20 + static_cast<std::uint32_t>(i),
                                               gamma ? 0.5 : -0.5, gamma ? 1.5 : 0.5));
    }
  }
  store.zero_grads(cpu());
  block.forward(x, kiln::Mode::train);
  std::vector<std::size_t> ready_order;
  const auto dx = read(block.backward(dy, [&](std::size_t i) { ready_order.push_back(i); }));
  // Every parameter is reported exactly once.
  std::vector<std::size_t> sorted = ready_order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> all(store.parameters().size());
  std::iota(all.begin(), all.end(), 0);
  BOOST_TEST(sorted == all, what << ": ready() did not report every parameter once");

  kiln::test::GradCheckOptions opt;
  opt.step = 4e-3;
  opt.max_skipped_fraction = 0.1;
  check_gradient(what + " dx", x, dx, loss, opt);
  for (std::size_t i = 0; i < store.parameters().size(); ++i) {
    check_gradient(what + " d" + store[i].name, store[i].value, grad_of(store, i), loss, opt);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(bottleneck_with_downsample_gradients) {
  kiln::nn::ParameterStore store;
  kiln::resnet::Bottleneck block(store, "layer2.0", 4, 2, 2);
  BOOST_TEST(block.has_downsample());
  BOOST_TEST(block.out_channels() == 8);
  const char* names[] = {"layer2.0.conv1.weight", "layer2.0.bn1.weight", "layer2.0.bn1.bias",
                         "layer2.0.conv2.weight", "layer2.0.bn2.weight", "layer2.0.bn2.bias",
                         "layer2.0.conv3.weight", "layer2.0.bn3.weight", "layer2.0.bn3.bias",
                         "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
                         "layer2.0.downsample.1.bias"};
  BOOST_TEST_REQUIRE(store.parameters().size() == std::size(names));
  for (std::size_t i = 0; i < std::size(names); ++i) BOOST_TEST(store[i].name == names[i]);
  BOOST_TEST(kiln::shape_string(store.declared_shape(3)) == "(2, 2, 3, 3)");
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 5);
  check_block(block, store, ImageShape{4, 6, 6}, 2, "bottleneck");
}

BOOST_AUTO_TEST_CASE(bottleneck_identity_shortcut_gradients) {
  kiln::nn::ParameterStore store;
  kiln::resnet::Bottleneck block(store, "layer1.1", 8, 2, 1);
  BOOST_TEST(!block.has_downsample());
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 6);
  check_block(block, store, ImageShape{8, 4, 4}, 2, "bottleneck identity");
}

BOOST_AUTO_TEST_CASE(basic_block_with_downsample_gradients) {
  kiln::nn::ParameterStore store;
  kiln::resnet::BasicBlock block(store, "layer3.0", 3, 4, 2);
  BOOST_TEST(block.has_downsample());
  store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 7);
  check_block(block, store, ImageShape{3, 5, 5}, 2, "basic block");
}

// share_gradient_buffers: a chain of blocks (downsample, identity, basic) gives bit-identical
// input and parameter gradients with shared and with private gradient buffers, and the shared
// buffers really are one allocation per slot.
BOOST_AUTO_TEST_CASE(shared_gradient_buffers_change_no_result) {
  struct Chain {
    kiln::nn::ParameterStore store;
    kiln::resnet::Bottleneck a{store, "layer1.0", 4, 2, 2};
    kiln::resnet::Bottleneck b{store, "layer1.1", 8, 2, 1};
    kiln::resnet::BasicBlock c{store, "layer2.0", 8, 4, 1};
  };
  const kiln::Layout layout = cpu().activation_layout(kiln::DType::f32);
  const Tensor x = device_f32({2, 4, 6, 6}, random_values(2 * 4 * 36, 31, -2, 2), layout);
  const auto run = [&](Chain& chain, bool share) {
    chain.store.allocate(cpu(), kiln::DType::f32, kiln::DType::f32, 8);
    ImageShape s = chain.a.build(cpu(), 2, ImageShape{4, 6, 6}, kiln::DType::f32);
    s = chain.b.build(cpu(), 2, s, kiln::DType::f32);
    s = chain.c.build(cpu(), 2, s, kiln::DType::f32);
    if (share) kiln::resnet::share_gradient_buffers(cpu(), {&chain.a, &chain.b, &chain.c});
    chain.store.zero_grads(cpu());
    const Tensor y = chain.c.forward(chain.b.forward(chain.a.forward(x, kiln::Mode::train), kiln::Mode::train),
                                     kiln::Mode::train);
    const Tensor dy = device_f32(y.shape(), random_values(static_cast<std::size_t>(y.numel()), 32), y.layout());
    std::vector<std::vector<double>> out{read(y)};
    out.push_back(read(chain.a.backward(chain.b.backward(chain.c.backward(dy, {}), {}), {})));
    for (std::size_t i = 0; i < chain.store.parameters().size(); ++i) out.push_back(grad_of(chain.store, i));
    return out;
  };
  Chain own, shared;
  const auto want = run(own, false);
  const auto got = run(shared, true);
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) BOOST_TEST(got[i] == want[i], "result " << i);
  // One storage per slot, across blocks and within one (ping and pong alternate down a branch),
  // and distinct storages for distinct slots.
  const auto storage_of = [](kiln::resnet::ResidualBlock& block, kiln::resnet::GradSlot slot) {
    std::set<const void*> found;
    for (const auto& g : block.gradient_buffers()) {
      if (g.slot == slot) found.insert(g.buffer->storage().get());
    }
    return found;
  };
  using kiln::resnet::GradSlot;
  for (GradSlot slot : {GradSlot::sum, GradSlot::ping, GradSlot::pong, GradSlot::input}) {
    const auto a = storage_of(shared.a, slot);
    BOOST_TEST(a.size() == 1u);
    BOOST_TEST((storage_of(shared.b, slot) == a));
    BOOST_TEST((storage_of(shared.c, slot) == a));
  }
  BOOST_TEST((storage_of(shared.a, GradSlot::ping) != storage_of(shared.a, GradSlot::pong)));
  BOOST_TEST((storage_of(shared.a, GradSlot::shortcut) == storage_of(shared.c, GradSlot::shortcut)));
  BOOST_TEST(storage_of(shared.b, GradSlot::shortcut).empty());  // identity shortcut
  BOOST_TEST(storage_of(own.a, GradSlot::ping).size() > 1u);      // unshared: one buffer per layer
}

BOOST_AUTO_TEST_SUITE_END()
