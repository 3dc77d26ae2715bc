// Descriptors and enums for the Backend op set (backend.hpp).
//
// Op arguments follow llm.c's order: outputs first, then saved state, then inputs, then
// parameters. Gradient accumulation rule (written once, here): parameter gradients are
// accumulated (Accumulate::yes, `+=`), activation gradients are overwritten (`=`) unless a tensor
// has two consumers (the residual stream), where the caller asks for accumulation.
//
// Conventions every backend follows (tests/backend-conformance checks each against a float64
// reference, so a new backend learns them from its failures, not from a surprise in training):
// - dtypes: activations and weights in the compute dtype (f32, bf16 or f16); a 16-bit op may read
//   f32 master weights. Parameter gradients the ops accumulate into are f32: conv2d's dw, bias_grad's
//   db, batch-norm's dgamma/dbeta. Batch-norm statistics, gamma and beta are f32. Softmax
//   cross-entropy (probs, stats, dlogits) and the optimizer updates are f32 only. matmul's c (and
//   bias) is in a's dtype, or f32 (weight gradients accumulated with beta = 1).
// - matmul with beta == 0 never reads c (it may hold NaN).
// - gelu is the tanh approximation (PyTorch's approximate="tanh").
// - Average pooling divides by the whole window, padding included (PyTorch's count_include_pad);
//   no ceil_mode: out_h/out_w below are floor divisions.
// - Dropout masks are u8 holding exactly 0 or 1, from rng.hpp's formula per element index, so
//   every backend drops the same elements for the same seed.
// - batchnorm_backward takes the save_mean/save_invstd the same backend's training forward wrote.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/op_table.hpp"
#include "kiln/tensor.hpp"

namespace kiln {

/// Whether an op overwrites its output or adds to it.
enum class Accumulate : std::uint8_t { no = 0, yes = 1 };
/// Whether a matmul operand is used transposed.
enum class Transpose : std::uint8_t { no = 0, yes = 1 };

/// Element-wise activations a model may ask for.
enum class Activation : std::uint8_t { relu = 0, tanh = 1, sigmoid = 2, gelu = 3 };
std::string_view activation_name(Activation a) noexcept;

/// Every op a Backend may implement (generated from KILN_OPS, op_table.hpp); Backend::supports(op,
/// dtype) answers per op and dtype so a model can refuse to build on a backend that lacks
/// something, naming the op.
enum class Op : std::uint16_t {
#define KILN_OP_ENUMERATOR(name) name,
  KILN_OPS(KILN_OP_ENUMERATOR)
#undef KILN_OP_ENUMERATOR
};
/// How many ops KILN_OPS lists.
#define KILN_OP_PLUS_ONE(name) +1
inline constexpr std::size_t kOpCount = 0 KILN_OPS(KILN_OP_PLUS_ONE);
#undef KILN_OP_PLUS_ONE
/// Every op, in enum order.
inline constexpr std::array<Op, kOpCount> kAllOps = {
#define KILN_OP_VALUE(name) Op::name,
    KILN_OPS(KILN_OP_VALUE)
#undef KILN_OP_VALUE
};
/// The op's name ("conv2d_forward"), as spelled in KILN_OPS; "unknown" for a value outside it.
std::string_view op_name(Op op) noexcept;

/// Hyper-parameters of one SGD step (PyTorch semantics):
///   g = grad + weight_decay * p;  buf = momentum * buf + (1 - dampening) * g;
///   g = nesterov ? g + momentum * buf : buf;  p -= lr * g.
/// With momentum == 0 the momentum buffer is neither read nor written.
struct SgdStep {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  enum class Nesterov : std::uint8_t { no, yes } nesterov = Nesterov::no;
};

/// Hyper-parameters of one Adam/AdamW step (PyTorch semantics, no amsgrad). `step` is the
/// 1-based step count used for bias correction. Coupled: g += weight_decay * p (Adam);
/// decoupled: p *= 1 - lr * weight_decay before the update (AdamW).
struct AdamStep {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  std::int64_t step = 1;
  enum class Decay : std::uint8_t { coupled, decoupled } decay = Decay::coupled;
};

/// A 2-D convolution, logical NCHW input (N, C, H, W), filters (K, C/groups, R, S).
struct Conv2dDesc {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t k = 0, r = 0, s = 0;         // output channels, filter height, filter width
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;
  DType dtype = DType::f32;
  std::int64_t out_h() const noexcept { return (h + 2 * pad_h - dilation_h * (r - 1) - 1) / stride_h + 1; }
  std::int64_t out_w() const noexcept { return (w + 2 * pad_w - dilation_w * (s - 1) - 1) / stride_w + 1; }
};

/// Batch normalisation over (N, H, W) per channel C. Statistics are always f32.
struct BatchNormDesc {
  std::int64_t n = 0, c = 0, h = 1, w = 1;
  float eps = 1e-5f;
  float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch (PyTorch)
  DType dtype = DType::f32;
};

/// Max or average pooling over (H, W).
struct Pool2dDesc {
  enum class Kind : std::uint8_t { max, average } kind = Kind::max;
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  DType dtype = DType::f32;
  std::int64_t out_h() const noexcept { return (h + 2 * pad_h - kernel_h) / stride_h + 1; }
  std::int64_t out_w() const noexcept { return (w + 2 * pad_w - kernel_w) / stride_w + 1; }
};

/// Per-channel normalisation of u8 images: y = (x / 255 - mean[c]) / std[c].
struct ImageNormalize {
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
};

}  // namespace kiln
