// The plain-C++ half of the cuda backend's kernel group, without a GPU: launch geometry, vector
// widths, dtype dispatch, the device copy of the dropout mask formula (bit-equal to kiln/rng.hpp,
// which is what makes cpu and cuda masks identical), Adam's host-side constants, the supports()
// table (op_table.hpp), and every argument check with its message (tensors tagged as device memory over host
// bytes: validation reads only metadata, never the data).
#define BOOST_TEST_MODULE cuda_kernel_logic
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include <kiln/errors.hpp>
#include <kiln/rng.hpp>

#include "kernels/dtype_dispatch.hpp"
#include "kernels/launch_geometry.hpp"
#include "kernels/mask_rng.hpp"
#include "kernels/optimizer_math.hpp"
#include "op_table.hpp"
#include "ops/kernel_validate.hpp"

namespace kk = kiln::cuda::kernels;
using kiln::DType;
using kiln::Layout;
using kiln::Tensor;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A tensor that claims device memory (over host bytes nobody reads).
Tensor dev(kiln::Shape shape, DType dtype, Layout layout = Layout::row_major) {
  const std::size_t bytes = std::max<std::size_t>(64, kiln::shape_numel(shape) * kiln::dtype_size(dtype));
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  auto storage = std::make_shared<kiln::Storage>(p, bytes, kiln::MemoryKind::device, [](void* q) { std::free(q); });
  return Tensor(storage, std::move(shape), dtype, 0, layout);
}

/// Runs f, expects a BackendError whose message contains every part; returns the message.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kiln::BackendError& e) {
    return e.what();
  }
  return "(no error)";
}

#define KILN_EXPECT_ERROR(expr, part)                                                         \
  do {                                                                                        \
    const std::string msg_ = error_of([&] { expr; });                                         \
    BOOST_TEST(contains(msg_, part), "message: " << msg_);                                    \
    BOOST_TEST(contains(msg_, "; fix the arguments the calling layer passes"), "message: " << msg_); \
  } while (0)

}  // namespace

BOOST_AUTO_TEST_CASE(grid_stride_geometry_covers_the_work_once_up_to_a_cap) {
  BOOST_TEST(kk::grid_stride_geometry(0).grid == 0u);
  BOOST_TEST(kk::grid_stride_geometry(-5).grid == 0u);
  BOOST_TEST(kk::grid_stride_geometry(1).grid == 1u);
  BOOST_TEST(kk::grid_stride_geometry(1).block == 256u);
  BOOST_TEST(kk::grid_stride_geometry(256).grid == 1u);
  BOOST_TEST(kk::grid_stride_geometry(257).grid == 2u);
  BOOST_TEST(kk::grid_stride_geometry(256 * 8192).grid == 8192u);
  BOOST_TEST(kk::grid_stride_geometry(std::int64_t{1} << 40).grid == 8192u);
  BOOST_TEST(kk::grid_stride_geometry(1000, 128).grid == 8u);
  BOOST_TEST(kk::grid_stride_geometry(1000, 128, 4).grid == 4u);
}

BOOST_AUTO_TEST_CASE(vector_width_needs_every_pointer_aligned) {
  alignas(16) static float buffer[16];
  BOOST_TEST(kk::vector_width(4, {buffer, buffer + 4}) == 4);
  BOOST_TEST(kk::vector_width(2, {buffer, buffer + 8}) == 8);
  BOOST_TEST(kk::vector_width(4, {buffer, buffer + 1}) == 1);
  BOOST_TEST(kk::vector_width(4, {buffer + 2}) == 1);
  BOOST_TEST(kk::vector_width(4, {buffer, nullptr}) == 4);  // unused operand
  BOOST_TEST(kk::vector_width(32, {buffer}) == 1);
}

BOOST_AUTO_TEST_CASE(row_block_size_is_a_warp_multiple_with_about_eight_values_per_thread) {
  BOOST_TEST(kk::row_block_size(1) == 32u);
  BOOST_TEST(kk::row_block_size(10) == 32u);
  BOOST_TEST(kk::row_block_size(256) == 32u);
  BOOST_TEST(kk::row_block_size(257) == 64u);
  BOOST_TEST(kk::row_block_size(1000) == 128u);
  BOOST_TEST(kk::row_block_size(1000000) == 1024u);
  for (std::int64_t k : {1, 7, 33, 999, 4096, 50000}) BOOST_TEST(kk::row_block_size(k) % 32 == 0u);
  // Never above the __launch_bounds__ the row kernels are compiled with.
  for (std::int64_t k : {std::int64_t{1}, std::int64_t{8192}, std::int64_t{8193}, std::int64_t{1} << 40}) {
    BOOST_TEST(kk::row_block_size(k) <= kk::kMaxRowBlock);
  }
  BOOST_TEST(kk::row_block_size(std::int64_t{1} << 40) == kk::kMaxRowBlock);
}

BOOST_AUTO_TEST_CASE(cast_paths_follow_the_cpu_backends_rule) {
  BOOST_TEST((kk::cast_path(DType::f32, DType::f32) == kk::CastPath::copy));
  BOOST_TEST((kk::cast_path(DType::bf16, DType::bf16) == kk::CastPath::copy));
  BOOST_TEST((kk::cast_path(DType::f32, DType::f16) == kk::CastPath::f32_to_f16));
  BOOST_TEST((kk::cast_path(DType::f32, DType::bf16) == kk::CastPath::f32_to_bf16));
  BOOST_TEST((kk::cast_path(DType::f16, DType::f32) == kk::CastPath::f16_to_f32));
  BOOST_TEST((kk::cast_path(DType::bf16, DType::f32) == kk::CastPath::bf16_to_f32));
  BOOST_TEST((kk::cast_path(DType::f16, DType::bf16) == kk::CastPath::unsupported));
  BOOST_TEST((kk::cast_path(DType::i32, DType::f32) == kk::CastPath::unsupported));
  BOOST_TEST((kk::cast_path(DType::f32, DType::f64) == kk::CastPath::unsupported));
  BOOST_TEST(kk::exponent_mask(DType::f32) == 0x7f800000u);
  BOOST_TEST(kk::exponent_mask(DType::bf16) == 0x7f80u);
  BOOST_TEST(kk::exponent_mask(DType::f16) == 0x7c00u);
  BOOST_TEST(kk::exponent_mask(DType::i32) == 0u);
}

BOOST_AUTO_TEST_CASE(device_mask_formula_is_bit_equal_to_rng_hpp) {
  for (std::uint64_t seed : {0ull, 1ull, 42ull, 0xdeadbeefcafef00dull, ~0ull}) {
    for (std::uint64_t i = 0; i < 4096; ++i) {
      const std::uint64_t index = i * 2654435761ull + (i >> 3);
      BOOST_REQUIRE(kk::mask_mix64(index) == kiln::mix64(index));
      BOOST_REQUIRE(kk::mask_derive_seed(seed, index) == kiln::derive_seed(seed, index));
      const std::uint64_t bits = kiln::derive_seed(seed, index);
      BOOST_REQUIRE(kk::mask_unit_float(bits) == kiln::unit_float(bits));
      BOOST_REQUIRE(kk::dropout_keeps(seed, index, 0.3f) == (kiln::unit_float(bits) >= 0.3f));
    }
  }
  // Golden values pin the formula itself (a change to rng.hpp must be a conscious one).
  BOOST_TEST(kk::dropout_keeps(7, 0, 0.0f));
  int kept = 0;
  for (std::uint64_t i = 0; i < 10000; ++i) kept += kk::dropout_keeps(7, i, 0.25f) ? 1 : 0;
  BOOST_TEST(kept > 7300);
  BOOST_TEST(kept < 7700);
}

BOOST_AUTO_TEST_CASE(adam_constants_match_the_documented_formula) {
  kiln::AdamStep step;
  step.lr = 0.01f;
  step.beta1 = 0.9f;
  step.beta2 = 0.999f;
  step.eps = 1e-8f;
  step.weight_decay = 0.1f;
  step.step = 3;
  const kk::AdamCoefficients c = kk::adam_coefficients(step);
  const double b1 = 1.0 - std::pow(0.9f, 3.0), b2 = 1.0 - std::pow(0.999f, 3.0);
  BOOST_TEST(c.step_size == static_cast<float>(0.01f / b1));
  BOOST_TEST(c.inv_sqrt_bias2 == static_cast<float>(1.0 / std::sqrt(b2)));
  BOOST_TEST(c.coupled_decay == 0.1f);
  BOOST_TEST(c.shrink == 1.0f);
  step.decay = kiln::AdamStep::Decay::decoupled;
  const kk::AdamCoefficients d = kk::adam_coefficients(step);
  BOOST_TEST(d.coupled_decay == 0.0f);
  BOOST_TEST(d.shrink == 1.0f - 0.01f * 0.1f);
  BOOST_TEST(d.beta1 == 0.9f);
  BOOST_TEST(d.eps == 1e-8f);
}

BOOST_AUTO_TEST_CASE(supports_table) {
  using kiln::Op;
  using kiln::cuda::cuda_supports;
  for (Op op : {Op::activation_forward, Op::activation_backward, Op::add_relu_forward, Op::dropout_forward,
                Op::dropout_backward, Op::add, Op::cast, Op::scale, Op::check_finite, Op::global_avgpool_forward,
                Op::global_avgpool_backward, Op::normalize_image, Op::matmul, Op::conv2d_forward,
                Op::batchnorm_backward, Op::pool2d_forward, Op::bias_grad, Op::convert_layout}) {
    for (DType d : {DType::f32, DType::f16, DType::bf16}) BOOST_TEST(cuda_supports(op, d), kiln::op_name(op));
    BOOST_TEST(!cuda_supports(op, DType::f64), kiln::op_name(op));
  }
  for (Op op : {Op::softmax_xent_forward, Op::softmax_xent_backward, Op::sgd_update, Op::adam_update, Op::top_k_hits,
                Op::lerp}) {
    BOOST_TEST(cuda_supports(op, DType::f32), kiln::op_name(op));
    BOOST_TEST(!cuda_supports(op, DType::bf16), kiln::op_name(op));
  }
  // Synchronised batch-norm (kernels/batchnorm_sync_kernels.cu): the three float storage types.
  for (Op op : {Op::batchnorm_stats, Op::batchnorm_backward_reduce, Op::batchnorm_backward_elemt}) {
    for (DType d : {DType::f32, DType::f16, DType::bf16}) BOOST_TEST(cuda_supports(op, d), kiln::op_name(op));
    BOOST_TEST(!cuda_supports(op, DType::f64), kiln::op_name(op));
  }
  BOOST_TEST(!cuda_supports(static_cast<Op>(kiln::kOpCount), DType::f32));  // outside KILN_OPS
}

BOOST_AUTO_TEST_CASE(element_wise_checks_memory_dtype_shape_and_layout) {
  using namespace kiln::cuda;
  const Tensor x = dev({2, 3, 4, 5}, DType::bf16);
  const Tensor y = dev({2, 3, 4, 5}, DType::bf16);
  BOOST_TEST(validate_activation_forward(y, x, kiln::Activation::relu) == 120);
  BOOST_TEST(validate_activation_forward(y.with_layout(Layout::nhwc), x.with_layout(Layout::nhwc),
                                         kiln::Activation::gelu) == 120);
  KILN_EXPECT_ERROR(validate_activation_forward(y, kiln::host_tensor({2, 3, 4, 5}, DType::bf16), kiln::Activation::relu),
                    "cuda backend, activation_forward: x bf16(2, 3, 4, 5) is in host memory, which the cuda "
                    "backend's ops cannot read");
  KILN_EXPECT_ERROR(validate_activation_forward(y.with_layout(Layout::nhwc), x, kiln::Activation::relu),
                    "y bf16(2, 3, 4, 5) nhwc is nhwc but x bf16(2, 3, 4, 5) is row-major; element-wise "
                    "ops need one layout for all operands");
  KILN_EXPECT_ERROR(validate_activation_forward(dev({2, 3, 4, 5}, DType::f32), x, kiln::Activation::relu),
                    "y is f32(2, 3, 4, 5) but must be bf16");
  KILN_EXPECT_ERROR(validate_activation_forward(dev({2, 3}, DType::i32), dev({2, 3}, DType::i32), kiln::Activation::relu),
                    "x is i32(2, 3) but must be f32, bf16 or f16");
  KILN_EXPECT_ERROR(validate_activation_forward(dev({6}, DType::bf16), dev({2, 3}, DType::bf16), kiln::Activation::tanh),
                    "y is bf16(6) but must have the shape of x bf16(2, 3)");
  KILN_EXPECT_ERROR(validate_activation_forward(y, x, static_cast<kiln::Activation>(9)), "unknown activation 9");
  KILN_EXPECT_ERROR(validate_activation_forward(Tensor(), x, kiln::Activation::relu), "y is undefined but is required");

  KILN_EXPECT_ERROR(validate_add(y, x, dev({2, 3, 4, 5}, DType::bf16, Layout::nhwc)), "b bf16(2, 3, 4, 5) nhwc is nhwc");
  validate_add(y, x, x);
  validate_add_relu_forward(y, x, x);
  KILN_EXPECT_ERROR(validate_add_relu_forward(y, x, dev({2, 3, 4, 5}, DType::f16)), "residual is f16(2, 3, 4, 5) but must be bf16");
  validate_scale(dev({7}, DType::f16));
  KILN_EXPECT_ERROR(validate_scale(dev({7}, DType::i64)), "cuda backend, scale: t is i64(7) but must be f32, bf16 or f16");
}

BOOST_AUTO_TEST_CASE(activation_backward_reads_y_except_for_gelu) {
  using namespace kiln::cuda;
  const Tensor dx = dev({4, 8}, DType::f32), dy = dev({4, 8}, DType::f32);
  const Tensor x = dev({4, 8}, DType::f32), y = dev({4, 8}, DType::f32);
  BOOST_TEST(&validate_activation_backward(dx, dy, x, y, kiln::Activation::relu) == &y);
  BOOST_TEST(&validate_activation_backward(dx, dy, Tensor(), y, kiln::Activation::sigmoid) == &y);
  BOOST_TEST(&validate_activation_backward(dx, dy, x, Tensor(), kiln::Activation::gelu) == &x);
  KILN_EXPECT_ERROR(validate_activation_backward(dx, dy, x, Tensor(), kiln::Activation::tanh),
                    "y (its backward reads y = act(x)) is undefined but is required");
  KILN_EXPECT_ERROR(validate_activation_backward(dx, dy, Tensor(), y, kiln::Activation::gelu),
                    "x (gelu's backward reads x) is undefined but is required");
  KILN_EXPECT_ERROR(validate_activation_backward(dx, dy, x, dev({4, 8}, DType::f16), kiln::Activation::relu),
                    "y is f16(4, 8) but must be f32");
}

BOOST_AUTO_TEST_CASE(dropout_cast_and_check_finite_arguments) {
  using namespace kiln::cuda;
  const Tensor x = dev({3, 5}, DType::f16), y = dev({3, 5}, DType::f16), mask = dev({15}, DType::u8);
  validate_dropout_forward(y, mask, x, 0.5f);
  validate_dropout_forward(y, mask, x, 0.0f);
  KILN_EXPECT_ERROR(validate_dropout_forward(y, mask, x, 1.0f), "p = 1 is outside [0, 1)");
  KILN_EXPECT_ERROR(validate_dropout_forward(y, mask, x, std::numeric_limits<float>::quiet_NaN()), "is outside [0, 1)");
  KILN_EXPECT_ERROR(validate_dropout_forward(y, dev({15}, DType::f32), x, 0.5f), "mask is f32(15) but must be u8");
  KILN_EXPECT_ERROR(validate_dropout_backward(y, x, dev({14}, DType::u8), 0.5f),
                    "cuda backend, dropout_backward: mask is u8(14) but must have as many elements as dy f16(3, 5)");

  validate_cast(dev({4}, DType::bf16), dev({2, 2}, DType::f32));
  validate_cast(dev({4}, DType::f32), dev({4}, DType::f32));
  KILN_EXPECT_ERROR(validate_cast(dev({4}, DType::bf16), dev({4}, DType::f16)),
                    "cannot convert src f16(4) to dst bf16(4); cast converts between f32 and bf16/f16 only");
  KILN_EXPECT_ERROR(validate_cast(dev({5}, DType::bf16), dev({4}, DType::f32)), "dst is bf16(5) but must have as many elements as src f32(4)");

  validate_check_finite(dev({1}, DType::i32), dev({9}, DType::bf16));
  KILN_EXPECT_ERROR(validate_check_finite(dev({2}, DType::i32), dev({9}, DType::f32)), "flag is i32(2) but must have one element");
  KILN_EXPECT_ERROR(validate_check_finite(dev({1}, DType::f32), dev({9}, DType::f32)), "flag is f32(1) but must be i32");
  KILN_EXPECT_ERROR(validate_check_finite(dev({1}, DType::i32), dev({9}, DType::u8)), "t is u8(9) but must be f32, bf16 or f16");
}

BOOST_AUTO_TEST_CASE(softmax_xent_arguments) {
  using namespace kiln::cuda;
  const Tensor logits = dev({8, 10}, DType::f32), probs = dev({8, 10}, DType::f32);
  const Tensor labels = dev({8}, DType::i32), stats = dev({2}, DType::f32);
  const kiln::cuda::kernels::RowsClasses rc = validate_softmax_xent_forward(probs, stats, logits, labels, 0.1f);
  BOOST_TEST(rc.rows == 8);
  BOOST_TEST(rc.classes == 10);
  BOOST_TEST(validate_softmax_xent_backward(probs, probs, labels, 0.0f).classes == 10);
  KILN_EXPECT_ERROR(validate_softmax_xent_forward(probs, stats, logits, labels, 1.0f), "label_smoothing = 1 is outside [0, 1)");
  KILN_EXPECT_ERROR(validate_softmax_xent_forward(probs, stats, logits, dev({7}, DType::i32), 0.0f),
                    "labels is i32(7) but must have shape (8)");
  KILN_EXPECT_ERROR(validate_softmax_xent_forward(probs, dev({3}, DType::f32), logits, labels, 0.0f), "stats is f32(3) but must have shape (2)");
  KILN_EXPECT_ERROR(validate_softmax_xent_forward(dev({8, 10}, DType::bf16), stats, logits, labels, 0.0f), "probs is bf16(8, 10) but must be f32");
  KILN_EXPECT_ERROR(validate_softmax_xent_forward(dev({8, 0}, DType::f32), stats, dev({8, 0}, DType::f32), labels, 0.0f),
                    "logits f32(8, 0) has no classes");
  KILN_EXPECT_ERROR(validate_softmax_xent_backward(probs, probs, dev({8}, DType::i64), 0.0f),
                    "cuda backend, softmax_xent_backward: labels is i64(8) but must be i32");
}

BOOST_AUTO_TEST_CASE(top_k_hits_arguments) {
  using namespace kiln::cuda;
  const Tensor logits = dev({8, 1000}, DType::f32), labels = dev({8}, DType::i32), count = dev({1}, DType::f32);
  const kiln::cuda::kernels::RowsClasses rc = validate_top_k_hits(count, logits, labels, 5);
  BOOST_TEST(rc.rows == 8);
  BOOST_TEST(rc.classes == 1000);
  KILN_EXPECT_ERROR(validate_top_k_hits(count, logits, labels, 0), "cuda backend, top_k_hits: k = 0 must be at least 1");
  KILN_EXPECT_ERROR(validate_top_k_hits(dev({2}, DType::f32), logits, labels, 5), "count is f32(2) but must have shape (1)");
  KILN_EXPECT_ERROR(validate_top_k_hits(count, dev({8, 1000}, DType::bf16), labels, 5),
                    "logits is bf16(8, 1000) but must be f32");
  KILN_EXPECT_ERROR(validate_top_k_hits(count, logits, dev({7}, DType::i32), 5), "labels is i32(7) but must have shape (8)");
  KILN_EXPECT_ERROR(validate_top_k_hits(count, dev({8, 0}, DType::f32), labels, 5), "logits f32(8, 0) has no classes");
}

BOOST_AUTO_TEST_CASE(lerp_arguments) {
  using namespace kiln::cuda;
  const Tensor dst = dev({3, 100}, DType::f32), src = dev({3, 100}, DType::f32);
  validate_lerp(dst, src, 0.0f);
  validate_lerp(dst, src, 1.0f);
  validate_lerp(dst, dst, 0.25f);  // src may be dst
  KILN_EXPECT_ERROR(validate_lerp(dst, dev({300}, DType::f32), 0.5f),
                    "cuda backend, lerp: src is f32(300) but must have the shape of dst f32(3, 100)");
  KILN_EXPECT_ERROR(validate_lerp(dev({3, 100}, DType::bf16), dev({3, 100}, DType::bf16), 0.5f),
                    "dst is bf16(3, 100) but must be f32");
  KILN_EXPECT_ERROR(validate_lerp(dst, kiln::host_tensor({3, 100}, DType::f32), 0.5f),
                    "src f32(3, 100) is in host memory");
  KILN_EXPECT_ERROR(validate_lerp(dst, src, -0.1f), "weight = -0.1 must be in [0, 1]");
  KILN_EXPECT_ERROR(validate_lerp(dst, src, 1.5f), "weight = 1.5 must be in [0, 1]");
  KILN_EXPECT_ERROR(validate_lerp(dst, src, std::numeric_limits<float>::quiet_NaN()), "weight = nan must be in [0, 1]");
}

BOOST_AUTO_TEST_CASE(optimizer_arguments) {
  using namespace kiln::cuda;
  const Tensor p = dev({100}, DType::f32), g = dev({100}, DType::f32), m = dev({100}, DType::f32), v = dev({100}, DType::f32);
  kiln::SgdStep sgd;
  validate_sgd_update(p, Tensor(), g, sgd);  // momentum 0: no buffer needed
  sgd.momentum = 0.9f;
  KILN_EXPECT_ERROR(validate_sgd_update(p, Tensor(), g, sgd), "momentum (required when momentum != 0) is undefined but is required");
  validate_sgd_update(p, m, g, sgd);
  KILN_EXPECT_ERROR(validate_sgd_update(p, m, dev({100}, DType::bf16), sgd), "grad is bf16(100) but must be f32");
  kiln::AdamStep adam;
  validate_adam_update(p, m, v, g, adam);
  adam.step = 0;
  KILN_EXPECT_ERROR(validate_adam_update(p, m, v, g, adam), "step = 0 but Adam's step count is 1-based");
  adam.step = 1;
  KILN_EXPECT_ERROR(validate_adam_update(p, m, dev({99}, DType::f32), g, adam), "v is f32(99) but must have the shape of param f32(100)");
}

BOOST_AUTO_TEST_CASE(pooling_and_image_arguments_honour_layouts) {
  using namespace kiln::cuda;
  const Tensor x = dev({2, 16, 7, 7}, DType::f16, Layout::nhwc), y = dev({2, 16}, DType::f16);
  kiln::cuda::kernels::ImageGeometry g = validate_global_avgpool_forward(y, x);
  BOOST_TEST(g.n == 2);
  BOOST_TEST(g.c == 16);
  BOOST_TEST(g.hw == 49);
  BOOST_TEST((g.layout == Layout::nhwc));
  g = validate_global_avgpool_backward(x.with_layout(Layout::row_major), y);
  BOOST_TEST((g.layout == Layout::row_major));
  KILN_EXPECT_ERROR(validate_global_avgpool_forward(dev({2, 15}, DType::f16), x), "y is f16(2, 15) but must have shape (2, 16)");
  KILN_EXPECT_ERROR(validate_global_avgpool_forward(y, dev({2, 16, 0, 7}, DType::f16)), "has an empty spatial extent");
  KILN_EXPECT_ERROR(validate_global_avgpool_backward(dev({2, 16, 49}, DType::f16), y), "dx is f16(2, 16, 49) but must be 4-D");

  const Tensor src = dev({2, 5, 6, 3}, DType::u8);
  kiln::ImageNormalize norm;
  const kiln::cuda::kernels::ChannelAffine a = validate_normalize_image(dev({2, 3, 5, 6}, DType::bf16, Layout::nhwc), src, norm);
  BOOST_TEST(a.scale[1] == 1.0f / (255.0f * 0.224f));
  BOOST_TEST(a.shift[2] == -0.406f / 0.225f);
  KILN_EXPECT_ERROR(validate_normalize_image(dev({2, 3, 5, 6}, DType::f32), dev({2, 5, 6, 4}, DType::u8), norm),
                    "src is u8(2, 5, 6, 4) but must be (N, H, W, 3)");
  KILN_EXPECT_ERROR(validate_normalize_image(dev({2, 3, 6, 5}, DType::f32), src, norm), "dst is f32(2, 3, 6, 5) but must have shape (2, 3, 5, 6)");
  norm.std[1] = 0.0f;
  KILN_EXPECT_ERROR(validate_normalize_image(dev({2, 3, 5, 6}, DType::f32), src, norm), "std[1] = 0 must be positive");
  norm.std[1] = 0.224f;
  KILN_EXPECT_ERROR(validate_normalize_image(dev({2, 3, 5, 6}, DType::f32), dev({2, 5, 6, 3}, DType::f32), norm), "src is f32(2, 5, 6, 3) but must be u8");
}
