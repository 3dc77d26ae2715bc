// The cpu backend's `conv1x1` option: pointwise convolutions (1x1, stride 1, no padding) on
// channels-last tensors computed as strided matmuls (ops/conv1x1_matmul.hpp) give what oneDNN's
// convolution gives, in all three directions, for f32, bf16 (native kernels and the widened
// path), f16, f32 master weights in a bf16 plan, Accumulate::yes and ::no, and shapes whose M, C
// and K are no multiple of a vector; NCHW tensors keep the convolution; "auto" takes the matmul in
// f32 plans only (where it was measured faster); a wrong value is a config error. Both backends
// are built explicitly, so every machine tests both paths.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "cpu_fixture.hpp"
#include "kiln/backend.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

auto cpu_with(const std::string& conv1x1, const std::string& bf16_compute = "auto") {
  ParamMap params("backend");
  params.set("threads", std::int64_t{0}, "test");
  params.set("conv1x1", conv1x1, "test");
  params.set("bf16_compute", bf16_compute, "test");
  // Backward-filters by oneDNN or the matmul only: Kiln's AVX2 kernel has its own tests
  // (test_conv_filter_avx2.cpp).
  params.set("conv_filter", std::string("onednn"), "test");
  return make_cpu_backend(params);
}

Tensor copy_of(const Tensor& t) {
  Tensor c = poisoned(t.shape(), t.dtype()).with_layout(t.layout());
  std::memcpy(c.data(), t.data(), t.bytes());
  return c;
}

/// What one plan computes: y, dx, dw written (Accumulate::no) and dw added into dw0 (::yes), and
/// the path each call ran ("direction/path" -> calls, cpu_fixture.hpp).
struct Results {
  Tensor y, dx, dw, dw_added;
  ConvPathCounts paths;
};

std::string path_of(const Results& r, const std::string& direction) { return test::path_of(r.paths, direction); }

struct Case {
  DType plan;       // the plan's dtype
  DType act;        // x, y, dy, dx
  DType weights;    // w (f32: master weights read by a bf16 plan)
  DType out;        // y (a bf16 plan may write f32)
  DType grad;       // dw
};

Results run(Backend& b, const Conv2dDesc& d, const Case& k, const Tensor& x, const Tensor& w, const Tensor& dy,
            const Tensor& dw0, Layout layout) {
  auto plan = b.plan_conv2d(d);
  const auto act = [&](const Shape& s, DType t) { return poisoned(s, t).with_layout(layout); };
  Results r{act(dy.shape(), k.out), act(x.shape(), k.act), poisoned(w.shape(), k.grad), copy_of(dw0), {}};
  const ConvPathCounts before = conv_path_counts(b);
  b.conv2d_forward(*plan, r.y, x, w);
  b.conv2d_backward_data(*plan, r.dx, dy, w);
  b.conv2d_backward_filter(*plan, r.dw, dy, x, Accumulate::no);
  b.conv2d_backward_filter(*plan, r.dw_added, dy, x, Accumulate::yes);
  r.paths = conv_paths_since(before, conv_path_counts(b));
  return r;
}

/// Relative bound for an output stored in `t`: f32 sums in another order; a 16-bit output may
/// land one rounding step (of the largest value) apart.
double bound(DType t) {
  switch (t) {
    case DType::bf16: return 1.0 / 128;
    case DType::f16: return 1.0 / 1024;
    default: return 2e-5;
  }
}

void compare(Backend& matmul, Backend& conv, const Case& k, Layout layout, std::mt19937& rng) {
  // (n, c, h, w, k): odd channel counts and pixel counts, a batch of one, ResNet-like 64->48.
  for (const auto& [n, c, h, wd, kk] : {std::tuple{2, 13, 5, 7, 19}, std::tuple{1, 64, 7, 7, 48},
                                         std::tuple{3, 33, 4, 3, 8}, std::tuple{2, 16, 9, 9, 32}}) {
    Conv2dDesc d;
    d.n = n, d.c = c, d.h = h, d.w = wd, d.k = kk, d.r = d.s = 1, d.dtype = k.plan;
    BOOST_TEST_CONTEXT("plan " << dtype_name(k.plan) << " act " << dtype_name(k.act) << " w "
                               << dtype_name(k.weights) << " y " << dtype_name(k.out) << " dw "
                               << dtype_name(k.grad) << (layout == Layout::nhwc ? " nhwc" : " nchw") << " n " << n
                               << " c " << c << " " << h << "x" << wd << " k " << kk) {
      const auto in = [&](const Shape& s, DType t, bool activation) {
        Tensor f = random_f32(s, rng);
        if (activation && layout == Layout::nhwc) f = to_channels_last(f);
        return to_dtype(f, t);
      };
      const Tensor x = in({n, c, h, wd}, k.act, true), dy = in({n, kk, h, wd}, k.act, true);
      const Tensor w = in({kk, c, 1, 1}, k.weights, false), dw0 = in({kk, c, 1, 1}, k.grad, false);
      const Results got = run(matmul, d, k, x, w, dy, dw0, layout);
      const Results want = run(conv, d, k, x, w, dy, dw0, layout);
      BOOST_TEST(relative_difference(got.y, want.y) <= bound(k.out));
      BOOST_TEST(relative_difference(got.dx, want.dx) <= bound(k.act));
      BOOST_TEST(relative_difference(got.dw, want.dw) <= bound(k.grad));
      BOOST_TEST(relative_difference(got.dw_added, want.dw_added) <= bound(k.grad));
      // The matmul runs every direction on channels-last tensors; NCHW ones keep the convolution.
      const std::string matmul_path = layout == Layout::nhwc ? "matmul" : "onednn";
      for (const char* direction : {"forward", "backward_data", "backward_filter"}) {
        BOOST_TEST(path_of(got, direction) == matmul_path, direction);
        BOOST_TEST(path_of(want, direction) == "onednn", direction);
      }
      if (layout == Layout::row_major) {  // NCHW keeps the convolution: the very same bits
        BOOST_TEST(std::memcmp(got.y.data(), want.y.data(), got.y.bytes()) == 0);
        BOOST_TEST(std::memcmp(got.dw_added.data(), want.dw_added.data(), got.dw_added.bytes()) == 0);
      }
    }
  }
}

const Case kCases[] = {
    {DType::f32, DType::f32, DType::f32, DType::f32, DType::f32},
    {DType::bf16, DType::bf16, DType::bf16, DType::bf16, DType::f32},   // bf16 plan, f32 master gradient
    {DType::bf16, DType::bf16, DType::bf16, DType::f32, DType::bf16},   // f32 y, bf16 dw
    {DType::bf16, DType::bf16, DType::f32, DType::bf16, DType::f32},    // f32 master weights
    {DType::f16, DType::f16, DType::f16, DType::f16, DType::f32},
    {DType::f16, DType::f16, DType::f16, DType::f16, DType::f16},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(conv1x1_matmul)

BOOST_AUTO_TEST_CASE(the_banner_says_which_path) {
  const std::string matmul = cpu_with("matmul")->device().detail;
  BOOST_TEST(matmul.find("1x1 convolutions as matmuls") != std::string::npos, matmul);
  BOOST_TEST(matmul.find("as matmuls in f32 plans") == std::string::npos, matmul);
  BOOST_TEST(cpu_with("conv")->device().detail.find("1x1 convolutions as matmuls") == std::string::npos);
  // auto is never on where convolutions run on the blocked layout (it was measured on channels-last).
  ParamMap params("backend");
  params.set("conv_layout", std::string("blocked"), "test");
  BOOST_TEST(make_cpu_backend(params)->device().detail.find("as matmuls") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(matmul_and_convolution_agree) {
  auto matmul = cpu_with("matmul"), conv = cpu_with("conv");
  std::mt19937 rng(11);
  for (const Case& k : kCases) {
    for (Layout layout : {Layout::nhwc, Layout::row_major}) compare(*matmul, *conv, k, layout, rng);
  }
}

BOOST_AUTO_TEST_CASE(matmul_and_convolution_agree_on_widened_bf16) {
  // bf16 stored, computed in f32 (what CPUs without bf16 kernels do), forced here on every CPU.
  auto matmul = cpu_with("matmul", "f32"), conv = cpu_with("conv", "f32");
  std::mt19937 rng(12);
  for (const Case& k : kCases) {
    if (k.plan == DType::bf16) compare(*matmul, *conv, k, Layout::nhwc, rng);
  }
}

BOOST_AUTO_TEST_CASE(auto_runs_matmuls_in_f32_plans_only) {
  // "auto" was measured to pay only for f32 plans (docs/benchmarks.md, "1x1 convolutions as
  // matmuls"): in all three directions from AVX-512 up, in backward-data only on AVX2. A bf16
  // plan must keep the convolution even where f32 plans take the matmul. The backend's path
  // counters say which path ran (the two may give the same bits: oneDNN's AVX-512 kernels on a
  // Zen 4 and its AVX2 ones on a Zen 2 sum some of these in the matmul's order).
  auto automatic = cpu_with("auto"), matmul = cpu_with("matmul"), conv = cpu_with("conv");
  const std::string detail = automatic->device().detail;
  const bool all_directions = detail.find("1x1 convolutions as matmuls in f32 plans") != std::string::npos;
  const bool backward_data =
      all_directions || detail.find("1x1 convolutions' backward-data as matmuls in f32 plans") != std::string::npos;
  BOOST_TEST_MESSAGE("auto runs f32 plans' 1x1 convolutions as matmuls here: all directions " << all_directions
                     << ", backward-data " << backward_data);
  std::mt19937 rng(13);
  const auto same = [](const Tensor& a, const Tensor& b) { return std::memcmp(a.data(), b.data(), a.bytes()) == 0; };
  // f32 plan; bf16 plan with f32 y and f32 gradients.
  for (const Case& k : {Case{DType::f32, DType::f32, DType::f32, DType::f32, DType::f32},
                        Case{DType::bf16, DType::bf16, DType::bf16, DType::f32, DType::f32}}) {
    BOOST_TEST_CONTEXT("plan " << dtype_name(k.plan)) {
      Conv2dDesc d;
      d.n = 2, d.c = 64, d.h = 9, d.w = 9, d.k = 64, d.r = d.s = 1, d.dtype = k.plan;
      const auto act = [&](const Shape& s) { return to_dtype(to_channels_last(random_f32(s, rng)), k.act); };
      const Tensor x = act({2, 64, 9, 9}), dy = act({2, 64, 9, 9});
      const Tensor w = to_dtype(random_f32({64, 64, 1, 1}, rng), k.weights);
      const Tensor dw0 = to_dtype(random_f32({64, 64, 1, 1}, rng), k.grad);
      const Results a = run(*automatic, d, k, x, w, dy, dw0, Layout::nhwc);
      const Results m = run(*matmul, d, k, x, w, dy, dw0, Layout::nhwc);
      const Results c = run(*conv, d, k, x, w, dy, dw0, Layout::nhwc);
      const bool f32 = k.plan == DType::f32;
      const std::string forward_and_filter = all_directions && f32 ? "matmul" : "onednn";
      BOOST_TEST(path_of(a, "forward") == forward_and_filter);
      BOOST_TEST(path_of(a, "backward_filter") == forward_and_filter);
      BOOST_TEST(path_of(a, "backward_data") == (backward_data && f32 ? "matmul" : "onednn"));
      // And the bits of the path it ran.
      const Results& ff = forward_and_filter == "matmul" ? m : c;
      const Results& data = backward_data && f32 ? m : c;
      BOOST_TEST(same(a.y, ff.y), "auto's forward gave other bits than its path");
      BOOST_TEST(same(a.dw, ff.dw), "auto's backward-filter gave other bits than its path");
      BOOST_TEST(same(a.dw_added, ff.dw_added), "auto's accumulated backward-filter gave other bits than its path");
      BOOST_TEST(same(a.dx, data.dx), "auto's backward-data gave other bits than its path");
    }
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_mode_is_a_config_error) {
  const std::string msg = error_text<ConfigError>([&] { cpu_with("gemm"); });
  BOOST_TEST(msg.find("\"gemm\" is not a 1x1 convolution mode") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
