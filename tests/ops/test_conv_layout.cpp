// The cpu backend's `conv_layout` option: convolutions computed on oneDNN's blocked activation
// layout (the default on AVX2 CPUs whose 3x3 convolutions run direct, reordered at the edges) give
// what the channels-last ones give (the default elsewhere), in all three directions; "auto"
// picks as documented; a wrong value is a config error.
// Both backends are built explicitly, so every machine tests both paths.
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>

#include "cpu_fixture.hpp"
#include "kiln/backend.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

/// A backend with this layout; 3x3 convolutions direct (`conv3x3 = "auto"` may run Kiln's own
/// Winograd on the channels-last tensors instead, which no layout choice touches).
BackendPtr cpu_with_layout(const std::string& layout, const std::string& conv3x3 = "direct") {
  return make_cpu_backend_with({{"conv_layout", layout}, {"conv3x3", conv3x3}});
}

bool runs_blocked(const BackendPtr& backend) {
  return backend->device().detail.find("convolutions on oneDNN's blocked activation layout") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv_layout)

BOOST_AUTO_TEST_CASE(blocked_and_channels_last_convolutions_agree) {
  auto nhwc = cpu_with_layout("channels_last");
  auto blocked = cpu_with_layout("blocked");
  BOOST_TEST(blocked->device().detail.find("convolutions on oneDNN's blocked activation layout") != std::string::npos,
             blocked->device().detail);
  BOOST_TEST(nhwc->device().detail.find("blocked activation layout") == std::string::npos, nhwc->device().detail);
  std::mt19937 rng(7);
  // A ResNet-like 3x3 and a strided 1x1 with channel counts no multiple of 8 or 16 (padded blocks).
  for (const auto& [c, k, r, stride] : {std::tuple{16, 32, 3, 1}, std::tuple{12, 20, 1, 2}}) {
    Conv2dDesc d;
    d.n = 2, d.c = c, d.h = 10, d.w = 10, d.k = k, d.r = r, d.s = r;
    d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = r / 2, d.dtype = DType::f32;
    BOOST_TEST_CONTEXT("c " << c << " k " << k << " r " << r << " stride " << stride) {
      const Tensor x = to_channels_last(random_f32({d.n, d.c, d.h, d.w}, rng));
      const Tensor w = random_f32({d.k, d.c, d.r, d.s}, rng);
      const Tensor dy = to_channels_last(random_f32({d.n, d.k, d.out_h(), d.out_w()}, rng));
      Tensor y[2], dx[2], dw[2];
      Backend* backends[2] = {nhwc.get(), blocked.get()};
      for (int i = 0; i < 2; ++i) {
        auto plan = backends[i]->plan_conv2d(d);
        y[i] = poisoned(dy.shape()).with_layout(Layout::nhwc);
        dx[i] = poisoned(x.shape()).with_layout(Layout::nhwc);
        dw[i] = poisoned(w.shape());
        backends[i]->conv2d_forward(*plan, y[i], x, w);
        backends[i]->conv2d_backward_data(*plan, dx[i], dy, w);
        backends[i]->conv2d_backward_filter(*plan, dw[i], dy, x, Accumulate::no);
      }
      BOOST_TEST(relative_difference(y[1], y[0]) < 1e-5);
      BOOST_TEST(relative_difference(dx[1], dx[0]) < 1e-5);
      BOOST_TEST(relative_difference(dw[1], dw[0]) < 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(auto_is_blocked_only_on_avx2_with_direct_3x3_convolutions) {
  // The banner names oneDNN's ISA: "ISA avx2" below AVX-512 (the only ISA below it these
  // machines have), where the blocked layout pays unless Kiln's Winograd runs on channels-last.
  auto direct = cpu_with_layout("auto", "direct");
  const bool avx2 = direct->device().detail.find("ISA avx2") != std::string::npos;
  BOOST_TEST(runs_blocked(direct) == avx2, direct->device().detail);
  auto winograd = cpu_with_layout("auto", "kiln_winograd");
  BOOST_TEST(!runs_blocked(winograd), winograd->device().detail);
}

BOOST_AUTO_TEST_CASE(an_unknown_layout_is_a_config_error) {
  const std::string msg = error_text<ConfigError>([&] { cpu_with_layout("nchw8c"); });
  BOOST_TEST(msg.find("\"nchw8c\" is not a convolution layout") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
