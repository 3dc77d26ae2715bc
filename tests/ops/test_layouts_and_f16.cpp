// The cpu backend's two storage options beyond f32 NCHW, checked against the path the other tests
// already check against float64 references:
// - channels-last (Layout::nhwc, what layers pass between them): every image op gives the same
//   logical result as with NCHW tensors (conv: bit-identical, since NCHW is reordered into the
//   same channels-last primitive; batch-norm runs other kernels, so within f32 rounding);
// - f16 (stored f16, computed f32): conv, batch-norm, pooling and matmul on f16 tensors equal the
//   f32 computation on the same f16-rounded inputs, rounded once to f16.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_fixture.hpp"
#include "kiln/backend.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/half.hpp"

namespace kiln::test {
namespace {

Tensor poisoned_like(const Tensor& t) { return poisoned(t.shape(), t.dtype()).with_layout(t.layout()); }

Conv2dDesc conv_desc(DType dtype) {
  Conv2dDesc d;
  d.n = 2, d.c = 8, d.h = 9, d.w = 9, d.k = 16, d.r = 3, d.s = 3;
  d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.dtype = dtype;
  return d;
}

struct ConvResult {
  std::vector<double> y, dx, dw;
};

ConvResult run_conv(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& dy) {
  auto plan = cpu().plan_conv2d(d);
  Tensor y = poisoned_like(dy), dx = poisoned_like(x);
  Tensor dw = poisoned(w.shape(), DType::f32);
  cpu().fill(dw, 0.0);
  cpu().conv2d_forward(*plan, y, x, w);
  cpu().conv2d_backward_data(*plan, dx, dy, w);
  cpu().conv2d_backward_filter(*plan, dw, dy, x, Accumulate::yes);
  const auto widen = [](const Tensor& t) { return t.dtype() == DType::f32 ? t : to_f32(t); };
  return {logical_values(widen(y)), logical_values(widen(dx)), values(dw)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layouts_and_f16)

BOOST_AUTO_TEST_CASE(conv2d_channels_last_equals_nchw_bit_for_bit) {
  std::mt19937 rng(71);
  const Conv2dDesc d = conv_desc(DType::f32);
  const Tensor x = random_f32({d.n, d.c, d.h, d.w}, rng);
  const Tensor w = random_f32({d.k, d.c, d.r, d.s}, rng);
  const Tensor dy = random_f32({d.n, d.k, d.out_h(), d.out_w()}, rng);
  const ConvResult nchw = run_conv(d, x, w, dy);
  const ConvResult nhwc = run_conv(d, to_channels_last(x), w, to_channels_last(dy));
  BOOST_TEST(nhwc.y == nchw.y);
  BOOST_TEST(nhwc.dx == nchw.dx);
  BOOST_TEST(nhwc.dw == nchw.dw);
  // Mixed: an NCHW input with a channels-last output, as the first layer of a model gets.
  const ConvResult mixed = run_conv(d, x, w, to_channels_last(dy));
  BOOST_TEST(mixed.y == nchw.y);
  BOOST_TEST(mixed.dx == nchw.dx);
}

BOOST_AUTO_TEST_CASE(conv2d_f16_is_f32_arithmetic_on_f16_values) {
  std::mt19937 rng(72);
  const Conv2dDesc d = conv_desc(DType::f16);
  const Tensor x = rounded(random_f32({d.n, d.c, d.h, d.w}, rng), DType::f16);
  const Tensor w = rounded(random_f32({d.k, d.c, d.r, d.s}, rng), DType::f16);
  const Tensor dy = rounded(random_f32({d.n, d.k, d.out_h(), d.out_w()}, rng), DType::f16);
  const ConvResult want = run_conv(conv_desc(DType::f32), x, w, dy);
  const ConvResult got = run_conv(d, to_dtype(to_channels_last(x), DType::f16), to_dtype(w, DType::f16),
                                  to_dtype(to_channels_last(dy), DType::f16));
  // y and dx were rounded once to f16 (half an ulp: 2^-11 relative); dw stays f32.
  check_close(f32_tensor({static_cast<std::int64_t>(got.y.size())}, std::vector<float>(got.y.begin(), got.y.end())),
              want.y, 4.9e-4, 1e-6, "conv f16 y");
  check_close(f32_tensor({static_cast<std::int64_t>(got.dx.size())}, std::vector<float>(got.dx.begin(), got.dx.end())),
              want.dx, 4.9e-4, 1e-6, "conv f16 dx");
  check_close(f32_tensor({static_cast<std::int64_t>(got.dw.size())}, std::vector<float>(got.dw.begin(), got.dw.end())),
              want.dw, 1e-5, 1e-6, "conv f16 dw");
}

BOOST_AUTO_TEST_CASE(batchnorm_channels_last_and_f16) {
  std::mt19937 rng(73);
  BatchNormDesc d;
  d.n = 4, d.c = 16, d.h = 5, d.w = 5;
  const Tensor x = rounded(random_f32({d.n, d.c, d.h, d.w}, rng, -2.0f, 3.0f), DType::f16);
  const Tensor dy = rounded(random_f32({d.n, d.c, d.h, d.w}, rng), DType::f16);
  const Tensor gamma = random_f32({d.c}, rng, 0.5f, 1.5f), beta = random_f32({d.c}, rng);
  struct Out {
    std::vector<double> y, dx, mean, invstd, rm, rv, dgamma, dbeta;
  };
  const auto run = [&](DType dtype, Layout layout) {
    BatchNormDesc dd = d;
    dd.dtype = dtype;
    auto plan = cpu().plan_batchnorm(dd);
    const Tensor xi = to_dtype(layout == Layout::nhwc ? to_channels_last(x) : x, dtype);
    const Tensor dyi = to_dtype(layout == Layout::nhwc ? to_channels_last(dy) : dy, dtype);
    Tensor y = poisoned_like(xi), dx = poisoned_like(xi);
    Tensor mean = poisoned({d.c}), invstd = poisoned({d.c}), rm = f32_tensor({d.c}, std::vector<float>(16, 0.0f)),
           rv = f32_tensor({d.c}, std::vector<float>(16, 1.0f)), dg = f32_tensor({d.c}, std::vector<float>(16, 0.0f)),
           db = f32_tensor({d.c}, std::vector<float>(16, 0.0f));
    cpu().batchnorm_train_forward(*plan, y, mean, invstd, xi, gamma, beta, rm, rv);
    cpu().batchnorm_backward(*plan, dx, dg, db, dyi, xi, gamma, mean, invstd);
    return Out{logical_values(to_f32(y)), logical_values(to_f32(dx)), values(mean),
               values(invstd), values(rm), values(rv), values(dg), values(db)};
  };
  const Out ref = run(DType::f32, Layout::row_major);
  for (Layout layout : {Layout::row_major, Layout::nhwc}) {
    for (DType dtype : {DType::f32, DType::f16}) {
      const Out got = run(dtype, layout);
      // f32: other kernels, f32 rounding. f16: outputs rounded once to f16.
      const double tol = dtype == DType::f32 ? 2e-5 : 1e-3;
      const std::string what = std::string(dtype_name(dtype)) + (layout == Layout::nhwc ? " nhwc" : " nchw");
      const auto close = [&](const std::vector<double>& g, const std::vector<double>& w, const char* name) {
        check_close(f32_tensor({static_cast<std::int64_t>(g.size())}, std::vector<float>(g.begin(), g.end())), w, tol,
                    tol, "batchnorm " + what + " " + name);
      };
      close(got.y, ref.y, "y");
      close(got.dx, ref.dx, "dx");
      close(got.mean, ref.mean, "save_mean");
      close(got.invstd, ref.invstd, "save_invstd");
      close(got.rm, ref.rm, "running_mean");
      close(got.rv, ref.rv, "running_var");
      close(got.dgamma, ref.dgamma, "dgamma");
      close(got.dbeta, ref.dbeta, "dbeta");
    }
  }
  // The f16 nhwc loops are the f32 ones on the f16 values (rows widened to f32, outputs rounded
  // once): the same statistics and parameter gradients bit for bit, each output the f32 one
  // rounded to f16.
  const Out f32_nhwc = run(DType::f32, Layout::nhwc), f16_nhwc = run(DType::f16, Layout::nhwc);
  const auto rounded_to_f16 = [](const std::vector<double>& v) {
    std::vector<double> out;
    for (double x : v) out.push_back(sdk::f16_to_f32(sdk::f32_to_f16(static_cast<float>(x))));
    return out;
  };
  BOOST_TEST(f16_nhwc.y == rounded_to_f16(f32_nhwc.y));
  BOOST_TEST(f16_nhwc.dx == rounded_to_f16(f32_nhwc.dx));
  BOOST_TEST(f16_nhwc.mean == f32_nhwc.mean);
  BOOST_TEST(f16_nhwc.invstd == f32_nhwc.invstd);
  BOOST_TEST(f16_nhwc.rm == f32_nhwc.rm);
  BOOST_TEST(f16_nhwc.rv == f32_nhwc.rv);
  BOOST_TEST(f16_nhwc.dgamma == f32_nhwc.dgamma);
  BOOST_TEST(f16_nhwc.dbeta == f32_nhwc.dbeta);
}

BOOST_AUTO_TEST_CASE(pooling_channels_last_and_f16) {
  std::mt19937 rng(74);
  const Tensor x = rounded(random_f32({2, 8, 7, 7}, rng), DType::f16);
  const Tensor dy = rounded(random_f32({2, 8, 4, 4}, rng), DType::f16);
  const auto run = [&](Pool2dDesc::Kind kind, DType dtype, Layout layout) {
    Pool2dDesc d;
    d.kind = kind, d.n = 2, d.c = 8, d.h = 7, d.w = 7, d.kernel_h = d.kernel_w = 3;
    d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.dtype = dtype;
    auto plan = cpu().plan_pool2d(d);
    const Tensor xi = to_dtype(layout == Layout::nhwc ? to_channels_last(x) : x, dtype);
    const Tensor dyi = to_dtype(layout == Layout::nhwc ? to_channels_last(dy) : dy, dtype);
    Tensor y = poisoned_like(dyi), dx = poisoned_like(xi);
    cpu().pool2d_forward(*plan, y, xi);
    cpu().pool2d_backward(*plan, dx, dyi, xi, y);
    return std::pair{logical_values(to_f32(y)), logical_values(to_f32(dx))};
  };
  for (auto kind : {Pool2dDesc::Kind::max, Pool2dDesc::Kind::average}) {
    const auto ref = run(kind, DType::f32, Layout::row_major);
    for (Layout layout : {Layout::row_major, Layout::nhwc}) {
      for (DType dtype : {DType::f32, DType::f16}) {
        const auto got = run(kind, dtype, layout);
        const double tol = dtype == DType::f32 ? 1e-6 : 4.9e-4;
        const std::string what = std::string(kind == Pool2dDesc::Kind::max ? "max " : "avg ") +
                                 std::string(dtype_name(dtype)) + (layout == Layout::nhwc ? " nhwc" : " nchw");
        check_close(f32_tensor({static_cast<std::int64_t>(got.first.size())}, std::vector<float>(got.first.begin(), got.first.end())),
                    ref.first, tol, 1e-7, "pool " + what + " y");
        check_close(f32_tensor({static_cast<std::int64_t>(got.second.size())}, std::vector<float>(got.second.begin(), got.second.end())),
                    ref.second, tol, 1e-7, "pool " + what + " dx");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(global_avgpool_and_normalize_image_channels_last) {
  std::mt19937 rng(75);
  const Tensor x = random_f32({3, 16, 5, 6}, rng);
  Tensor y_nchw = poisoned({3, 16}), y_nhwc = poisoned({3, 16});
  cpu().global_avgpool_forward(y_nchw, x);
  cpu().global_avgpool_forward(y_nhwc, to_channels_last(x));
  check_close(y_nhwc, values(y_nchw), 1e-6, 1e-7, "global avgpool nhwc forward");
  Tensor dx_nchw = poisoned({3, 16, 5, 6}), dx_nhwc = poisoned({3, 16, 5, 6}).with_layout(Layout::nhwc);
  cpu().global_avgpool_backward(dx_nchw, y_nchw);
  cpu().global_avgpool_backward(dx_nhwc, y_nchw);
  BOOST_TEST(logical_values(dx_nhwc) == values(dx_nchw));

  Tensor img = host_tensor({2, 4, 5, 3}, DType::u8);
  for (std::int64_t i = 0; i < img.numel(); ++i) img.data_as<std::uint8_t>()[i] = static_cast<std::uint8_t>(rng() & 0xff);
  const ImageNormalize norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  Tensor n_nchw = poisoned({2, 3, 4, 5}), n_nhwc = poisoned({2, 3, 4, 5}).with_layout(Layout::nhwc);
  cpu().normalize_image(n_nchw, img, norm);
  cpu().normalize_image(n_nhwc, img, norm);
  BOOST_TEST(logical_values(n_nhwc) == values(n_nchw));
}

BOOST_AUTO_TEST_CASE(matmul_f16_is_f32_arithmetic_on_f16_values) {
  std::mt19937 rng(76);
  const Tensor a = rounded(random_f32({5, 7}, rng), DType::f16);
  const Tensor b = rounded(random_f32({6, 7}, rng), DType::f16);
  const Tensor bias = random_f32({6}, rng);
  const Tensor c0 = rounded(random_f32({5, 6}, rng), DType::f16);
  Tensor want = host_tensor({5, 6}, DType::f32);
  cpu().copy(c0, want);
  cpu().matmul(want, a, Transpose::no, b, Transpose::yes, 0.5f, 1.0f, bias);
  Tensor got16 = to_dtype(c0, DType::f16);
  cpu().matmul(got16, to_dtype(a, DType::f16), Transpose::no, to_dtype(b, DType::f16), Transpose::yes, 0.5f, 1.0f, bias);
  check_close(got16, values(want), 4.9e-4, 1e-6, "matmul f16 -> f16");
  Tensor got32 = poisoned({5, 6});
  cpu().matmul(got32, to_dtype(a, DType::f16), Transpose::no, to_dtype(b, DType::f16), Transpose::yes, 1.0f, 0.0f, Tensor());
  Tensor want32 = poisoned({5, 6});
  cpu().matmul(want32, a, Transpose::no, b, Transpose::yes, 1.0f, 0.0f, Tensor());
  check_close(got32, values(want32), 1e-6, 1e-7, "matmul f16 -> f32");
}

BOOST_AUTO_TEST_CASE(layout_tags_on_tensor_views) {
  const Tensor t = host_tensor({4, 3, 2, 2}, DType::f32).with_layout(Layout::nhwc);
  BOOST_TEST((t.layout() == Layout::nhwc));
  BOOST_TEST(t.describe() == "f32(4, 3, 2, 2) nhwc");
  // rows() keeps the layout (the batch is outermost in nhwc too) and the right bytes.
  const Tensor r = t.rows(1, 2);
  BOOST_TEST((r.layout() == Layout::nhwc));
  BOOST_TEST(r.offset_bytes() == 12 * sizeof(float));
  // Reshaping channels-last data would scramble it; retagging opaque data is refused.
  std::string msg = error_text<BackendError>([&] { (void)t.reshape({4, 12}); });
  BOOST_TEST(msg.find("only row-major tensors can be reshaped") != std::string::npos, msg);
  msg = error_text<BackendError>([&] { (void)t.with_layout(Layout::opaque); });
  BOOST_TEST(msg.find("cannot tag or untag an opaque-layout tensor") != std::string::npos, msg);
  BOOST_TEST(t.reshape({4, 3, 2, 2}).shape() == (Shape{4, 3, 2, 2}));  // same shape is fine
}

BOOST_AUTO_TEST_CASE(element_wise_ops_refuse_mixed_layouts) {
  std::mt19937 rng(77);
  const Tensor a = random_f32({1, 2, 3, 3}, rng);
  const Tensor b = to_channels_last(a);
  Tensor c = poisoned({1, 2, 3, 3});
  const std::string msg = error_text<BackendError>([&] { cpu().add_relu_forward(c, a, b); });
  BOOST_TEST(msg.find("residual f32(1, 2, 3, 3) nhwc is nhwc but y f32(1, 2, 3, 3) is row-major") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
