// bf16 ops on the widening path (bf16 stored, computed in f32: what the cpu backend does where
// oneDNN has no bf16 kernels, i.e. every CPU before AVX-512). The path is forced with the
// backend option bf16_compute = "f32", so machines with native bf16 test it too. Each oneDNN op
// (conv2d forward / backward-data / backward-filter, pooling, matmul) on bf16 tensors must equal,
// bit for bit, the f32 op of the shared backend on the same values widened, rounded once to bf16
// where the output is bf16: the same f32 primitive runs on the same numbers, and the widening and
// narrowing loops are exact / the SDK's rounding. f32 inputs of a bf16 conv plan are rounded to
// bf16 first, as oneDNN's bf16 primitive would read them.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>
#include <string>

#include "cpu_fixture.hpp"
#include "kiln/backend.hpp"
#include "kiln/errors.hpp"
#include "kiln/op_table.hpp"

namespace kiln::test {
namespace {

/// A cpu backend told to compute bf16 in f32 whatever the CPU has.
Backend& widened() {
  static Backend* backend = [] {
    ParamMap params("backend");
    params.set("threads", std::int64_t{0}, "test");
    params.set("bf16_compute", std::string("f32"), "test");
    return make_cpu_backend(params).release();  // lives until exit, like the library
  }();
  return *backend;
}

Tensor poisoned_like(const Tensor& t) { return poisoned(t.shape(), t.dtype()).with_layout(t.layout()); }

Tensor copy_of(const Tensor& t) {
  Tensor out = host_tensor(t.shape(), t.dtype()).with_layout(t.layout());
  std::memcpy(out.data(), t.data(), t.bytes());
  return out;
}

/// Random values already representable in bf16, in `layout` (f32).
Tensor bf16_values(const Shape& shape, std::mt19937& rng, Layout layout = Layout::row_major) {
  const Tensor t = rounded(random_f32(shape, rng), DType::bf16);
  return layout == Layout::nhwc ? to_channels_last(t) : t;
}

void check_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  BOOST_TEST_REQUIRE((got.dtype() == want.dtype()), what);
  BOOST_TEST_REQUIRE(got.bytes() == want.bytes(), what);
  BOOST_TEST(std::memcmp(got.data(), want.data(), got.bytes()) == 0, what << ": differs from the f32 op");
}

Conv2dDesc conv_desc(DType dtype) {
  Conv2dDesc d;
  d.n = 2, d.c = 8, d.h = 9, d.w = 9, d.k = 16, d.r = 3, d.s = 3;
  d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.dtype = dtype;
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bf16_widened)

BOOST_AUTO_TEST_CASE(the_backend_says_so_and_supports_bf16_like_f16) {
  const DeviceInfo info = widened().device();
  BOOST_TEST(info.detail.find("bf16: storage only, computed in f32") != std::string::npos, info.detail);
  for (Op op : kAllOps) {
    BOOST_TEST(widened().supports(op, DType::bf16) == widened().supports(op, DType::f16), op_name(op));
    BOOST_TEST(cpu().supports(op, DType::bf16) == cpu().supports(op, DType::f16), op_name(op));
  }
  ParamMap bad("backend");
  bad.set("bf16_compute", std::string("bf32"), "test");
  const std::string msg = error_text<ConfigError>([&] { make_cpu_backend(bad); });
  BOOST_TEST(msg.find("\"bf32\" is not a bf16 compute mode") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(conv2d_is_f32_arithmetic_on_bf16_values) {
  std::mt19937 rng(91);
  const Conv2dDesc d = conv_desc(DType::bf16);
  const Tensor x = bf16_values({d.n, d.c, d.h, d.w}, rng, Layout::nhwc);
  const Tensor w = bf16_values({d.k, d.c, d.r, d.s}, rng);
  const Tensor dy = bf16_values({d.n, d.k, d.out_h(), d.out_w()}, rng, Layout::nhwc);
  const Tensor dw0 = random_f32({d.k, d.c, d.r, d.s}, rng);  // an f32 master gradient to add to

  // Reference: the shared backend's f32 plan.
  auto ref = cpu().plan_conv2d(conv_desc(DType::f32));
  Tensor y32 = poisoned_like(dy), dx32 = poisoned_like(x), dw32 = copy_of(dw0);
  cpu().conv2d_forward(*ref, y32, x, w);
  cpu().conv2d_backward_data(*ref, dx32, dy, w);
  cpu().conv2d_backward_filter(*ref, dw32, dy, x, Accumulate::yes);
  Tensor dw32_fresh = poisoned(w.shape());
  cpu().conv2d_backward_filter(*ref, dw32_fresh, dy, x, Accumulate::no);
  const Tensor dw0_bf = to_dtype(dw0, DType::bf16);
  Tensor dw32_from_bf = to_f32(dw0_bf);
  cpu().conv2d_backward_filter(*ref, dw32_from_bf, dy, x, Accumulate::yes);

  auto plan = widened().plan_conv2d(d);
  const Tensor xb = to_dtype(x, DType::bf16), wb = to_dtype(w, DType::bf16), dyb = to_dtype(dy, DType::bf16);
  Tensor y = poisoned_like(dyb), dx = poisoned_like(xb);
  widened().conv2d_forward(*plan, y, xb, wb);
  widened().conv2d_backward_data(*plan, dx, dyb, wb);
  check_same_bits(y, to_dtype(y32, DType::bf16), "conv bf16 y");
  check_same_bits(dx, to_dtype(dx32, DType::bf16), "conv bf16 dx");

  // Weight gradients: the f32 master-gradient path (Accumulate::yes and no) and a bf16 dw.
  Tensor dw = copy_of(dw0);
  widened().conv2d_backward_filter(*plan, dw, dyb, xb, Accumulate::yes);
  check_same_bits(dw, dw32, "conv dw f32 += (bf16 plan)");
  Tensor dw_fresh = poisoned(w.shape());
  widened().conv2d_backward_filter(*plan, dw_fresh, dyb, xb, Accumulate::no);
  check_same_bits(dw_fresh, dw32_fresh, "conv dw f32 = (bf16 plan)");
  Tensor dw_bf = copy_of(dw0_bf);
  widened().conv2d_backward_filter(*plan, dw_bf, dyb, xb, Accumulate::yes);
  check_same_bits(dw_bf, to_dtype(dw32_from_bf, DType::bf16), "conv dw bf16 +=");

  // f32 outputs of the bf16 plan are the f32 results themselves (no rounding).
  Tensor y_f32 = poisoned_like(dy);
  widened().conv2d_forward(*plan, y_f32, xb, wb);
  check_same_bits(y_f32, y32, "conv bf16 plan, f32 y");
}

BOOST_AUTO_TEST_CASE(conv2d_rounds_f32_inputs_of_a_bf16_plan_to_bf16) {
  std::mt19937 rng(92);
  const Conv2dDesc d = conv_desc(DType::bf16);
  const Tensor x = to_dtype(bf16_values({d.n, d.c, d.h, d.w}, rng, Layout::nhwc), DType::bf16);
  const Tensor dy = to_dtype(bf16_values({d.n, d.k, d.out_h(), d.out_w()}, rng, Layout::nhwc), DType::bf16);
  const Tensor w_master = random_f32({d.k, d.c, d.r, d.s}, rng);  // not representable in bf16
  const Tensor w_bf = to_dtype(w_master, DType::bf16);
  auto plan = widened().plan_conv2d(d);
  Tensor from_f32 = poisoned_like(dy), from_bf16 = poisoned_like(dy);
  widened().conv2d_forward(*plan, from_f32, x, w_master);
  widened().conv2d_forward(*plan, from_bf16, x, w_bf);
  check_same_bits(from_f32, from_bf16, "conv y from f32 master weights");
  Tensor dx_f32 = poisoned_like(x), dx_bf16 = poisoned_like(x);
  widened().conv2d_backward_data(*plan, dx_f32, dy, w_master);
  widened().conv2d_backward_data(*plan, dx_bf16, dy, w_bf);
  check_same_bits(dx_f32, dx_bf16, "conv dx from f32 master weights");
}

BOOST_AUTO_TEST_CASE(pooling_is_f32_arithmetic_on_bf16_values) {
  std::mt19937 rng(93);
  for (auto kind : {Pool2dDesc::Kind::max, Pool2dDesc::Kind::average}) {
    for (Layout layout : {Layout::row_major, Layout::nhwc}) {
      const std::string what = std::string(kind == Pool2dDesc::Kind::max ? "max" : "avg") +
                               (layout == Layout::nhwc ? " nhwc" : " nchw");
      Pool2dDesc d;
      d.kind = kind, d.n = 2, d.c = 8, d.h = 7, d.w = 7, d.kernel_h = d.kernel_w = 3;
      d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.dtype = DType::f32;
      const Tensor x = bf16_values({2, 8, 7, 7}, rng, layout);
      const Tensor dy = bf16_values({2, 8, 4, 4}, rng, layout);
      auto ref = cpu().plan_pool2d(d);
      Tensor y32 = poisoned_like(dy), dx32 = poisoned_like(x);
      cpu().pool2d_forward(*ref, y32, x);
      cpu().pool2d_backward(*ref, dx32, dy, x, y32);

      d.dtype = DType::bf16;
      auto plan = widened().plan_pool2d(d);
      const Tensor xb = to_dtype(x, DType::bf16), dyb = to_dtype(dy, DType::bf16);
      Tensor y = poisoned_like(dyb), dx = poisoned_like(xb);
      widened().pool2d_forward(*plan, y, xb);
      widened().pool2d_backward(*plan, dx, dyb, xb, y);
      check_same_bits(y, to_dtype(y32, DType::bf16), "pool " + what + " y");
      check_same_bits(dx, to_dtype(dx32, DType::bf16), "pool " + what + " dx");
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_is_f32_arithmetic_on_bf16_values) {
  std::mt19937 rng(94);
  const Tensor a = bf16_values({5, 7}, rng), b = bf16_values({6, 7}, rng);
  const Tensor bias = random_f32({6}, rng), bias_bf = bf16_values({6}, rng);
  const Tensor c0 = bf16_values({5, 6}, rng);
  const Tensor ab = to_dtype(a, DType::bf16), bb = to_dtype(b, DType::bf16);

  // bf16 c, alpha, beta and an f32 bias: c = round(0.5 ab^T + c0 + bias).
  Tensor want = copy_of(c0);
  cpu().matmul(want, a, Transpose::no, b, Transpose::yes, 0.5f, 1.0f, bias);
  Tensor got = to_dtype(c0, DType::bf16);
  widened().matmul(got, ab, Transpose::no, bb, Transpose::yes, 0.5f, 1.0f, bias);
  check_same_bits(got, to_dtype(want, DType::bf16), "matmul bf16 -> bf16, f32 bias");

  // A bf16 bias, transposed a, beta 0.
  const Tensor at = bf16_values({7, 5}, rng);
  Tensor want2 = poisoned({5, 6});
  cpu().matmul(want2, at, Transpose::yes, b, Transpose::yes, 1.0f, 0.0f, bias_bf);
  Tensor got2 = poisoned({5, 6}, DType::bf16);
  widened().matmul(got2, to_dtype(at, DType::bf16), Transpose::yes, bb, Transpose::yes, 1.0f, 0.0f,
                   to_dtype(bias_bf, DType::bf16));
  check_same_bits(got2, to_dtype(want2, DType::bf16), "matmul bf16 -> bf16, bf16 bias");

  // f32 c: no rounding at all.
  Tensor want32 = poisoned({5, 6}), got32 = poisoned({5, 6});
  cpu().matmul(want32, a, Transpose::no, b, Transpose::yes, 1.0f, 0.0f, Tensor());
  widened().matmul(got32, ab, Transpose::no, bb, Transpose::yes, 1.0f, 0.0f, Tensor());
  check_same_bits(got32, want32, "matmul bf16 -> f32");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
