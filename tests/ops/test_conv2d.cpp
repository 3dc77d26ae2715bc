// conv2d forward / backward-data / backward-filter against a naive double reference over strides,
// padding, dilation, groups, 1x1 and 7x7 kernels and odd sizes; f32 (bound 1e-5 of the sum of
// |terms|) and bf16 (inputs rounded to bf16 for the reference; bound 1e-2 of it, and 2^-8
// relative for bf16 outputs). Also: Accumulate::yes on dw, plan reuse (same bits, no heap growth), argument errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

struct ConvRef {
  std::vector<double> y, y_scale, dx, dx_scale, dw, dw_scale;
};

/// All three convolution results (and the sums of |terms| that bound their rounding) in double.
ConvRef conv_reference(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& dy) {
  const std::int64_t P = d.out_h(), Q = d.out_w(), cg = d.c / d.groups, kg = d.k / d.groups;
  const float* xs = x.data_as<float>();
  const float* ws = w.data_as<float>();
  const float* gs = dy.data_as<float>();
  ConvRef r;
  r.y.assign(d.n * d.k * P * Q, 0.0);
  r.y_scale = r.y;
  r.dx.assign(x.numel(), 0.0);
  r.dx_scale = r.dx;
  r.dw.assign(w.numel(), 0.0);
  r.dw_scale = r.dw;
  for (std::int64_t n = 0; n < d.n; ++n)
    for (std::int64_t k = 0; k < d.k; ++k)
      for (std::int64_t p = 0; p < P; ++p)
        for (std::int64_t q = 0; q < Q; ++q) {
          const std::int64_t yi = ((n * d.k + k) * P + p) * Q + q;
          const std::int64_t g = k / kg;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t a = 0; a < d.r; ++a)
              for (std::int64_t b = 0; b < d.s; ++b) {
                const std::int64_t hi = p * d.stride_h - d.pad_h + a * d.dilation_h;
                const std::int64_t wi = q * d.stride_w - d.pad_w + b * d.dilation_w;
                if (hi < 0 || hi >= d.h || wi < 0 || wi >= d.w) continue;
                const std::int64_t xi = ((n * d.c + g * cg + c) * d.h + hi) * d.w + wi;
                const std::int64_t wj = ((k * cg + c) * d.r + a) * d.s + b;
                const double xv = xs[xi], wv = ws[wj], gv = gs[yi];
                r.y[yi] += xv * wv;
                r.y_scale[yi] += std::abs(xv * wv);
                r.dx[xi] += gv * wv;
                r.dx_scale[xi] += std::abs(gv * wv);
                r.dw[wj] += gv * xv;
                r.dw_scale[wj] += std::abs(gv * xv);
              }
        }
  return r;
}

Conv2dDesc conv(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                std::int64_t r, std::int64_t s, std::int64_t stride, std::int64_t pad,
                std::int64_t dilation = 1, std::int64_t groups = 1) {
  Conv2dDesc d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.k = k, d.r = r, d.s = s;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.dilation_h = d.dilation_w = dilation;
  d.groups = groups;
  return d;
}

std::string name_of(const Conv2dDesc& d) {
  return "conv c" + std::to_string(d.c) + " " + std::to_string(d.h) + "x" + std::to_string(d.w) +
         " k" + std::to_string(d.k) + " " + std::to_string(d.r) + "x" + std::to_string(d.s) +
         " s" + std::to_string(d.stride_h) + " p" + std::to_string(d.pad_h) + " d" +
         std::to_string(d.dilation_h) + " g" + std::to_string(d.groups) + " " +
         std::string(dtype_name(d.dtype));
}

const Conv2dDesc kShapes[] = {
    conv(2, 3, 7, 9, 4, 3, 3, 1, 1),         // odd sizes, same padding
    conv(2, 4, 9, 11, 6, 3, 3, 2, 1),        // stride 2 (ResNet v1.5 3x3)
    conv(1, 3, 9, 8, 5, 3, 3, 1, 2, 2),      // dilation 2
    conv(2, 4, 7, 7, 6, 3, 3, 1, 1, 1, 2),   // groups 2
    conv(2, 16, 7, 7, 32, 1, 1, 2, 0),       // 1x1 stride 2 (downsample), blocked layouts
    conv(1, 3, 15, 13, 8, 7, 7, 2, 3),       // 7x7 stride 2 pad 3 (the stem)
    conv(2, 16, 6, 6, 16, 3, 3, 1, 1),       // 16 channels: oneDNN's blocked kernels
    conv(1, 2, 5, 5, 3, 2, 2, 3, 0),         // stride larger than the kernel, uneven cover
};

/// Runs all three ops on one shape in `dtype` (outputs in `out`) and checks them.
void check_shape(Conv2dDesc d, DType dtype, DType out, std::mt19937& rng) {
  d.dtype = dtype;
  const std::string name = name_of(d) + " -> " + std::string(dtype_name(out));
  const Shape xs{d.n, d.c, d.h, d.w}, ws{d.k, d.c / d.groups, d.r, d.s},
      ys{d.n, d.k, d.out_h(), d.out_w()};
  const Tensor x = test::rounded(test::random_f32(xs, rng), dtype);
  const Tensor w = test::rounded(test::random_f32(ws, rng), dtype);
  const Tensor dy = test::rounded(test::random_f32(ys, rng), dtype);
  const ConvRef ref = conv_reference(d, x, w, dy);
  const double rtol = dtype == DType::f32 ? 1e-5 : 1e-2;
  const double out_rtol = out == DType::f32 ? 0.0 : 1.0 / 128;  // bf16 output rounding
  auto plan = cpu().plan_conv2d(d);

  Tensor y = test::poisoned(ys, out);
  cpu().conv2d_forward(*plan, y, test::to_dtype(x, dtype), test::to_dtype(w, dtype));
  std::vector<double> y_bound = ref.y_scale;
  for (std::size_t i = 0; i < y_bound.size(); ++i) y_bound[i] += out_rtol / rtol * std::abs(ref.y[i]);
  test::check_close(y, ref.y, rtol, 1e-6, name + " forward", &y_bound);

  Tensor dx = test::poisoned(xs, out);
  cpu().conv2d_backward_data(*plan, dx, test::to_dtype(dy, dtype), test::to_dtype(w, dtype));
  std::vector<double> dx_bound = ref.dx_scale;
  for (std::size_t i = 0; i < dx_bound.size(); ++i) dx_bound[i] += out_rtol / rtol * std::abs(ref.dx[i]);
  test::check_close(dx, ref.dx, rtol, 1e-6, name + " backward data", &dx_bound);

  // Master gradients are f32 whatever the compute dtype; the second call accumulates.
  Tensor dw = test::poisoned(ws, DType::f32);
  cpu().conv2d_backward_filter(*plan, dw, test::to_dtype(dy, dtype), test::to_dtype(x, dtype),
                               Accumulate::no);
  test::check_close(dw, ref.dw, rtol, 1e-6, name + " backward filter", &ref.dw_scale);
  std::vector<double> twice = ref.dw, twice_scale = ref.dw_scale;
  for (std::size_t i = 0; i < twice.size(); ++i) twice[i] *= 2, twice_scale[i] *= 2;
  cpu().conv2d_backward_filter(*plan, dw, test::to_dtype(dy, dtype), test::to_dtype(x, dtype),
                               Accumulate::yes);
  test::check_close(dw, twice, rtol, 1e-6, name + " backward filter accumulate", &twice_scale);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv2d)

BOOST_AUTO_TEST_CASE(f32_against_reference) {
  std::mt19937 rng(31);
  for (const Conv2dDesc& d : kShapes) check_shape(d, DType::f32, DType::f32, rng);
}

BOOST_AUTO_TEST_CASE(bf16_against_reference) {
  std::mt19937 rng(32);
  for (const Conv2dDesc& d : kShapes) {
    check_shape(d, DType::bf16, DType::f32, rng);
    check_shape(d, DType::bf16, DType::bf16, rng);
  }
}

BOOST_AUTO_TEST_CASE(bf16_plan_reads_f32_master_weights) {
  std::mt19937 rng(33);
  Conv2dDesc d = conv(2, 8, 6, 6, 8, 3, 3, 1, 1);
  d.dtype = DType::bf16;
  const Tensor x = test::random_f32({2, 8, 6, 6}, rng), w = test::random_f32({8, 8, 3, 3}, rng);
  auto plan = cpu().plan_conv2d(d);
  Tensor from_f32 = test::poisoned({2, 8, 6, 6}), from_bf16 = test::poisoned({2, 8, 6, 6});
  cpu().conv2d_forward(*plan, from_f32, test::to_dtype(x, DType::bf16), w);
  cpu().conv2d_forward(*plan, from_bf16, test::to_dtype(x, DType::bf16),
                       test::to_dtype(w, DType::bf16));
  BOOST_TEST(std::memcmp(from_f32.data(), from_bf16.data(), from_f32.bytes()) == 0);
}

BOOST_AUTO_TEST_CASE(plan_reuse_gives_identical_results) {
  std::mt19937 rng(34);
  Conv2dDesc d = conv(2, 16, 9, 9, 32, 3, 3, 2, 1);
  const Tensor x = test::random_f32({2, 16, 9, 9}, rng), w = test::random_f32({32, 16, 3, 3}, rng);
  const Tensor dy = test::random_f32({2, 32, 5, 5}, rng);
  auto plan = cpu().plan_conv2d(d);
  Tensor y1 = test::poisoned({2, 32, 5, 5}), y2 = test::poisoned({2, 32, 5, 5});
  Tensor dw1 = test::poisoned({32, 16, 3, 3}), dw2 = test::poisoned({32, 16, 3, 3});
  cpu().conv2d_forward(*plan, y1, x, w);
  cpu().conv2d_backward_filter(*plan, dw1, dy, x, Accumulate::no);
  cpu().conv2d_forward(*plan, y2, x, w);
  cpu().conv2d_backward_filter(*plan, dw2, dy, x, Accumulate::no);
  BOOST_TEST(std::memcmp(y1.data(), y2.data(), y1.bytes()) == 0);
  BOOST_TEST(std::memcmp(dw1.data(), dw2.data(), dw1.bytes()) == 0);

  // Steady state: a full forward/backward keeps no new heap memory.
  Tensor dx = test::poisoned({2, 16, 9, 9});
  const auto step = [&] {
    cpu().conv2d_forward(*plan, y2, x, w);
    cpu().conv2d_backward_data(*plan, dx, dy, w);
    cpu().conv2d_backward_filter(*plan, dw2, dy, x, Accumulate::yes);
  };
  test::check_heap_steady(step);
}

BOOST_AUTO_TEST_CASE(argument_errors) {
  Conv2dDesc d = conv(2, 4, 8, 8, 6, 3, 3, 1, 1, 1, 4);
  std::string msg = test::error_text<BackendError>([&] { cpu().plan_conv2d(d); });
  BOOST_TEST(msg.find("output channels 6 must both be divisible by groups 4") != std::string::npos,
             msg);
  d = conv(1, 3, 2, 2, 4, 5, 5, 1, 0);
  msg = test::error_text<BackendError>([&] { cpu().plan_conv2d(d); });
  BOOST_TEST(msg.find("gives an empty output") != std::string::npos, msg);

  d = conv(2, 3, 8, 8, 4, 3, 3, 1, 1);
  auto plan = cpu().plan_conv2d(d);
  Tensor x = host_tensor({2, 3, 8, 8}, DType::f32), w = host_tensor({4, 3, 3, 3}, DType::f32);
  Tensor bad_y = host_tensor({2, 4, 6, 6}, DType::f32);
  msg = test::error_text<BackendError>([&] { cpu().conv2d_forward(*plan, bad_y, x, w); });
  BOOST_TEST(msg.find("cpu backend, conv2d_forward: y is f32(2, 4, 6, 6) but must have shape "
                      "(2, 4, 8, 8)") != std::string::npos,
             msg);
  Tensor bf_w = host_tensor({4, 3, 3, 3}, DType::bf16), y = host_tensor({2, 4, 8, 8}, DType::f32);
  msg = test::error_text<BackendError>([&] { cpu().conv2d_forward(*plan, y, x, bf_w); });
  BOOST_TEST(msg.find("w is bf16(4, 3, 3, 3) but must be f32 or the plan's f32") !=
                 std::string::npos,
             msg);
  Pool2dDesc pd;
  pd.n = 2, pd.c = 3, pd.h = 8, pd.w = 8;
  auto pool = cpu().plan_pool2d(pd);
  msg = test::error_text<BackendError>([&] { cpu().conv2d_forward(*pool, y, x, w); });
  BOOST_TEST(msg.find("the plan passed was not made by the cpu backend's plan_conv2d") !=
                 std::string::npos,
             msg);
}

BOOST_AUTO_TEST_SUITE_END()
