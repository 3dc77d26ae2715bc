// Max / average pooling (forward, backward routed to the argmax or spread over the window with
// PyTorch's count_include_pad=True divisor), global average pooling and normalize_image, against
// double references; f32 and bf16 (inputs rounded for the reference, 2^-8 relative for outputs).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

Pool2dDesc pool(Pool2dDesc::Kind kind, std::int64_t n, std::int64_t c, std::int64_t h,
                std::int64_t w, std::int64_t k, std::int64_t stride, std::int64_t pad,
                DType dtype = DType::f32) {
  Pool2dDesc d;
  d.kind = kind, d.n = n, d.c = c, d.h = h, d.w = w;
  d.kernel_h = d.kernel_w = k, d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad;
  d.dtype = dtype;
  return d;
}

/// Checks |got - want| <= atol + rtol * |want| on the logical (NCHW-order) values of an f32
/// tensor in either layout.
void check_logical(const Tensor& got, const std::vector<double>& want, double rtol, double atol,
                   const std::string& what) {
  const std::vector<double> g = test::logical_values(got);
  BOOST_TEST_REQUIRE(g.size() == want.size());
  int bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::abs(g[i] - want[i]) <= atol + rtol * std::abs(want[i])) continue;
    if (++bad <= 3) BOOST_ERROR(what << ": element " << i << " is " << g[i] << ", want " << want[i]);
  }
  BOOST_TEST(bad == 0, what << ": " << bad << " elements differ");
}

/// Max or average pooling against a double reference. `layout` nhwc runs channels-last tensors
/// (f32 max pooling: Kiln's own loops, maxpool_nhwc.hpp); `levels` > 0 draws x from that many
/// values only, so windows hold ties (the first maximum in window order takes the gradient).
void check_pool(const Pool2dDesc& d, std::mt19937& rng, Layout layout = Layout::row_major, int levels = 0) {
  const bool is_max = d.kind == Pool2dDesc::Kind::max;
  const std::string name = std::string(is_max ? "max" : "avg") + " pool " +
                           std::string(dtype_name(d.dtype)) + " " + std::to_string(d.h) + "x" +
                           std::to_string(d.w) + " k" + std::to_string(d.kernel_h) + " s" +
                           std::to_string(d.stride_h) + " p" + std::to_string(d.pad_h) +
                           (layout == Layout::nhwc ? " nhwc" : "") + (levels > 0 ? " ties" : "");
  const std::int64_t P = d.out_h(), Q = d.out_w();
  const Shape xs{d.n, d.c, d.h, d.w}, ys{d.n, d.c, P, Q};
  Tensor x = test::rounded(test::random_f32(xs, rng), d.dtype);
  if (levels > 0) {
    float* v = x.data_as<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) v[i] = std::floor((v[i] + 1.0f) * 0.5f * levels) / levels;
  }
  const Tensor dy = test::rounded(test::random_f32(ys, rng), d.dtype);
  std::vector<double> y_ref(ys[0] * ys[1] * P * Q), dx_ref(x.numel(), 0.0);
  const float* xv = x.data_as<float>();
  const float* gv = dy.data_as<float>();
  for (std::int64_t nc = 0; nc < d.n * d.c; ++nc)
    for (std::int64_t p = 0; p < P; ++p)
      for (std::int64_t q = 0; q < Q; ++q) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        std::int64_t arg = -1;
        for (std::int64_t a = 0; a < d.kernel_h; ++a)
          for (std::int64_t b = 0; b < d.kernel_w; ++b) {
            const std::int64_t hi = p * d.stride_h - d.pad_h + a, wi = q * d.stride_w - d.pad_w + b;
            if (hi < 0 || hi >= d.h || wi < 0 || wi >= d.w) continue;
            const std::int64_t j = (nc * d.h + hi) * d.w + wi;
            sum += xv[j];
            if (xv[j] > best) best = xv[j], arg = j;
          }
        const std::int64_t yi = (nc * P + p) * Q + q;
        const double divisor = static_cast<double>(d.kernel_h * d.kernel_w);
        y_ref[yi] = is_max ? best : sum / divisor;
        if (is_max) {
          dx_ref[arg] += gv[yi];
          continue;
        }
        for (std::int64_t a = 0; a < d.kernel_h; ++a)
          for (std::int64_t b = 0; b < d.kernel_w; ++b) {
            const std::int64_t hi = p * d.stride_h - d.pad_h + a, wi = q * d.stride_w - d.pad_w + b;
            if (hi < 0 || hi >= d.h || wi < 0 || wi >= d.w) continue;
            dx_ref[(nc * d.h + hi) * d.w + wi] += gv[yi] / divisor;
          }
      }
  const double rtol = d.dtype == DType::f32 ? 1e-6 : 1.0 / 128;
  auto plan = cpu().plan_pool2d(d);
  if (layout == Layout::nhwc) {  // f32 only: logical_values reads f32
    const Tensor xl = test::to_channels_last(x), dyl = test::to_channels_last(dy);
    Tensor yl = test::poisoned(ys).with_layout(Layout::nhwc), dxl = test::poisoned(xs).with_layout(Layout::nhwc);
    cpu().pool2d_forward(*plan, yl, xl);
    check_logical(yl, y_ref, rtol, 1e-7, name + " forward");
    cpu().pool2d_backward(*plan, dxl, dyl, xl, yl);
    check_logical(dxl, dx_ref, rtol, 1e-6, name + " backward");
    return;
  }
  Tensor y = test::poisoned(ys, d.dtype), dx = test::poisoned(xs, d.dtype);
  const Tensor xd = test::to_dtype(x, d.dtype);
  cpu().pool2d_forward(*plan, y, xd);
  test::check_close(y, y_ref, rtol, 1e-7, name + " forward");
  cpu().pool2d_backward(*plan, dx, test::to_dtype(dy, d.dtype), xd, y);
  test::check_close(dx, dx_ref, rtol, 1e-6, name + " backward");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pooling)

BOOST_AUTO_TEST_CASE(max_and_average_against_reference) {
  std::mt19937 rng(51);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (auto kind : {Pool2dDesc::Kind::max, Pool2dDesc::Kind::average}) {
      check_pool(pool(kind, 2, 3, 9, 9, 3, 2, 1, dtype), rng);    // ResNet stem: 3x3 s2 p1
      check_pool(pool(kind, 1, 16, 8, 11, 3, 2, 1, dtype), rng);  // even and odd sides
      check_pool(pool(kind, 2, 4, 7, 7, 2, 2, 0, dtype), rng);    // drops the last row/column
      check_pool(pool(kind, 1, 2, 6, 5, 3, 1, 1, dtype), rng);    // stride 1, heavy overlap
    }
  }
}

BOOST_AUTO_TEST_CASE(channels_last_against_reference) {
  // Channels-last f32 max pooling runs Kiln's loops; the others (average) oneDNN's on nhwc.
  // Channel counts below, at and past a vector (3, 8, 64, 19); windows full of ties.
  std::mt19937 rng(52);
  for (auto kind : {Pool2dDesc::Kind::max, Pool2dDesc::Kind::average}) {
    check_pool(pool(kind, 2, 3, 9, 9, 3, 2, 1), rng, Layout::nhwc);
    check_pool(pool(kind, 1, 64, 8, 11, 3, 2, 1), rng, Layout::nhwc);
    check_pool(pool(kind, 2, 19, 7, 7, 2, 2, 0), rng, Layout::nhwc);
    check_pool(pool(kind, 1, 8, 6, 5, 3, 1, 1), rng, Layout::nhwc);
    for (int levels : {1, 3}) {
      check_pool(pool(kind, 2, 16, 9, 9, 3, 2, 1), rng, Layout::nhwc, levels);
      check_pool(pool(kind, 1, 8, 6, 5, 3, 1, 1), rng, Layout::nhwc, levels);
    }
  }
}

BOOST_AUTO_TEST_CASE(channels_last_max_takes_nan) {
  // As PyTorch's max_pool2d: a NaN in the window is the maximum, and takes the gradient; of two
  // NaNs the later one in window order. One channel, 3x3 input, 2x2 windows, stride 1:
  //   1   NaN  2        window (0,0): 1 NaN 3 4 -> the NaN at (0,1)
  //   3   4    NaN      window (0,1): NaN 2 4 NaN -> the later NaN, at (1,2)
  //   5   0    6        window (1,0): 3 4 5 0 -> 5 at (2,0); window (1,1): 4 NaN 0 6 -> (1,2)
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = test::to_channels_last(test::f32_tensor({1, 1, 3, 3}, {1, nan, 2, 3, 4, nan, 5, 0, 6}));
  const Pool2dDesc d = pool(Pool2dDesc::Kind::max, 1, 1, 3, 3, 2, 1, 0);
  auto plan = cpu().plan_pool2d(d);
  Tensor y = test::poisoned({1, 1, 2, 2}).with_layout(Layout::nhwc);
  Tensor dx = test::poisoned({1, 1, 3, 3}).with_layout(Layout::nhwc);
  cpu().pool2d_forward(*plan, y, x);
  const float* yv = y.data_as<float>();
  BOOST_TEST(std::isnan(yv[0]));
  BOOST_TEST(std::isnan(yv[1]));
  BOOST_TEST(yv[2] == 5.0f);
  BOOST_TEST(std::isnan(yv[3]));
  const Tensor dy = test::to_channels_last(test::f32_tensor({1, 1, 2, 2}, {10, 20, 30, 40}));
  cpu().pool2d_backward(*plan, dx, dy, x, y);
  // (0,0) -> the NaN at (0,1); (0,1) -> the later NaN at (1,2); (1,0) -> 5 at (2,0); (1,1) -> (1,2).
  check_logical(dx, {0, 10, 0, 0, 0, 60, 30, 0, 0}, 0, 0, "gradients routed to the NaNs");
}

BOOST_AUTO_TEST_CASE(max_backward_routes_to_the_argmax) {
  // 2x2 windows, stride 2: each gradient lands on its window's maximum, nowhere else.
  const Tensor x = test::f32_tensor({1, 1, 4, 4}, {1, 9, 2, 3,    //
                                                   4, 5, 8, 7,    //
                                                   6, 0, 1, 1,    //
                                                   2, 3, 5, 9.5});
  Pool2dDesc d = pool(Pool2dDesc::Kind::max, 1, 1, 4, 4, 2, 2, 0);
  auto plan = cpu().plan_pool2d(d);
  Tensor y = test::poisoned({1, 1, 2, 2}), dx = test::poisoned({1, 1, 4, 4});
  cpu().pool2d_forward(*plan, y, x);
  test::check_close(y, {9, 8, 6, 9.5}, 0, 0, "max pool values");
  const Tensor dy = test::f32_tensor({1, 1, 2, 2}, {10, 20, 30, 40});
  cpu().pool2d_backward(*plan, dx, dy, x, y);
  test::check_close(dx, {0, 10, 0, 0, 0, 0, 20, 0, 30, 0, 0, 0, 0, 0, 0, 40}, 0, 0,
                    "max pool gradient routing");

  const auto step = [&] {
    cpu().pool2d_forward(*plan, y, x);
    cpu().pool2d_backward(*plan, dx, dy, x, y);
  };
  test::check_heap_steady(step);  // the workspace lives in the plan
  test::check_close(dx, {0, 10, 0, 0, 0, 0, 20, 0, 30, 0, 0, 0, 0, 0, 0, 40}, 0, 0,
                    "max pool gradient routing, plan reused");

  auto fresh = cpu().plan_pool2d(d);
  const std::string msg =
      test::error_text<BackendError>([&] { cpu().pool2d_backward(*fresh, dx, dy, x, y); });
  BOOST_TEST(msg.find("backward called before any forward with this plan") != std::string::npos,
             msg);
}

BOOST_AUTO_TEST_CASE(average_counts_padding_like_pytorch) {
  // PyTorch AvgPool2d(3, stride=2, padding=1) on a 3x3 of ones: corner windows see 4 ones and
  // divide by 9 (count_include_pad=True): 4/9.
  Pool2dDesc d = pool(Pool2dDesc::Kind::average, 1, 1, 3, 3, 3, 2, 1);
  auto plan = cpu().plan_pool2d(d);
  const Tensor x = test::f32_tensor({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  Tensor y = test::poisoned({1, 1, 2, 2});
  cpu().pool2d_forward(*plan, y, x);
  test::check_close(y, {4.0 / 9, 4.0 / 9, 4.0 / 9, 4.0 / 9}, 1e-6, 0, "avg pool include padding");
}

// Kiln's max-pooling loops on channels-last bf16 and f16 tensors pool in f32, one image per
// thread: y is the f32 result narrowed (exact, a maximum is one of the inputs) and dx the f32
// sums rounded once. Three images (more than a 2-thread team), overlapping windows, and ties
// (values from 5 levels) so that tie-breaking and summed gradients both show.
BOOST_AUTO_TEST_CASE(max_pool_of_16_bit_channels_last_tensors_is_the_f32_result_rounded) {
  std::mt19937 rng(31);
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Pool2dDesc d32 = pool(Pool2dDesc::Kind::max, 3, 16, 9, 9, 3, 2, 1);
    Tensor x = test::random_f32({3, 16, 9, 9}, rng);
    for (float* v = static_cast<float*>(x.data()); v != static_cast<float*>(x.data()) + x.numel(); ++v) {
      *v = std::round(*v * 2.0f) / 2.0f;  // -1, -0.5, 0, 0.5, 1
    }
    const Tensor x32 = test::to_channels_last(x);
    const Tensor dy32 = test::to_channels_last(test::rounded(test::random_f32({3, 16, 5, 5}, rng), dtype));
    auto plan32 = cpu().plan_pool2d(d32);
    Tensor y32 = test::poisoned({3, 16, 5, 5}), dx32 = test::poisoned({3, 16, 9, 9});
    y32 = test::to_channels_last(y32), dx32 = test::to_channels_last(dx32);
    cpu().pool2d_forward(*plan32, y32, x32);
    cpu().pool2d_backward(*plan32, dx32, dy32, x32, y32);

    Pool2dDesc d16 = d32;
    d16.dtype = dtype;
    auto plan16 = cpu().plan_pool2d(d16);
    const Tensor x16 = test::to_dtype(x32, dtype), dy16 = test::to_dtype(dy32, dtype);
    Tensor y16 = test::to_dtype(y32, dtype), dx16 = test::to_dtype(dx32, dtype);
    std::memset(y16.data(), 0xA5, y16.bytes());
    std::memset(dx16.data(), 0xA5, dx16.bytes());
    cpu().pool2d_forward(*plan16, y16, x16);
    cpu().pool2d_backward(*plan16, dx16, dy16, x16, y16);
    const std::string name(dtype_name(dtype));
    const Tensor want_y = test::to_dtype(y32, dtype), want_dx = test::to_dtype(dx32, dtype);
    BOOST_TEST(std::memcmp(y16.data(), want_y.data(), y16.bytes()) == 0, name << " y differs from the f32 result");
    BOOST_TEST(std::memcmp(dx16.data(), want_dx.data(), dx16.bytes()) == 0, name << " dx differs from the f32 sums");
  }
}

BOOST_AUTO_TEST_CASE(global_average_pool) {
  std::mt19937 rng(52);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{4, 64, 7, 7}, Shape{3, 5, 1, 1}}) {
      const Tensor x = test::rounded(test::random_f32(s, rng), dtype);
      const Tensor dy = test::rounded(test::random_f32({s[0], s[1]}, rng), dtype);
      const std::int64_t hw = s[2] * s[3];
      std::vector<double> y_ref(s[0] * s[1], 0.0), dx_ref(x.numel());
      for (std::int64_t i = 0; i < s[0] * s[1]; ++i) {
        for (std::int64_t j = 0; j < hw; ++j) y_ref[i] += x.data_as<float>()[i * hw + j] / hw;
        for (std::int64_t j = 0; j < hw; ++j) dx_ref[i * hw + j] = dy.data_as<float>()[i] / hw;
      }
      const double rtol = dtype == DType::f32 ? 1e-5 : 1.0 / 128;
      Tensor y = test::poisoned({s[0], s[1]}, dtype), dx = test::poisoned(s, dtype);
      cpu().global_avgpool_forward(y, test::to_dtype(x, dtype));
      test::check_close(y, y_ref, rtol, 1e-6, "global avgpool forward " + std::string(dtype_name(dtype)));
      cpu().global_avgpool_backward(dx, test::to_dtype(dy, dtype));
      test::check_close(dx, dx_ref, rtol, 1e-7, "global avgpool backward " + std::string(dtype_name(dtype)));
    }
  }
  Tensor y = host_tensor({2, 4}, DType::f32), x = host_tensor({2, 3, 5, 5}, DType::f32);
  const std::string msg = test::error_text<BackendError>([&] { cpu().global_avgpool_forward(y, x); });
  BOOST_TEST(msg.find("y is f32(2, 4) but must have shape (2, 3)") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(normalize_image_nhwc_u8_to_nchw) {
  std::mt19937 rng(53);
  const std::int64_t n = 2, h = 5, w = 7;
  Tensor src = host_tensor({n, h, w, 3}, DType::u8);
  auto* px = src.data_as<std::uint8_t>();
  for (std::int64_t i = 0; i < src.numel(); ++i) px[i] = static_cast<std::uint8_t>(rng() & 0xff);
  px[0] = 0, px[1] = 255;
  ImageNormalize norm;
  std::vector<double> want(n * 3 * h * w);
  for (std::int64_t b = 0; b < n; ++b)
    for (int c = 0; c < 3; ++c)
      for (std::int64_t i = 0; i < h * w; ++i) {
        want[(b * 3 + c) * h * w + i] =
            (px[(b * h * w + i) * 3 + c] / 255.0 - norm.mean[c]) / norm.std[c];
      }
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    Tensor dst = test::poisoned({n, 3, h, w}, dtype);
    cpu().normalize_image(dst, src, norm);
    const double rtol = dtype == DType::f32 ? 1e-6 : dtype == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
    test::check_close(dst, want, rtol, 1e-6, "normalize_image " + std::string(dtype_name(dtype)));
  }
  Tensor wrong = host_tensor({n, h, w, 3}, DType::f32);
  const std::string msg = test::error_text<BackendError>(
      [&] { cpu().normalize_image(wrong, src, norm); });
  BOOST_TEST(msg.find("dst is f32(2, 5, 7, 3) but must have shape (2, 3, 5, 7)") !=
                 std::string::npos,
             msg);
}

BOOST_AUTO_TEST_SUITE_END()
