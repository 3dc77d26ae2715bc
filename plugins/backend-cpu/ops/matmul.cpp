// matmul: c(M, N) = alpha * op(a) op(b) + beta * c [+ bias(N)] through a cached oneDNN primitive.
// f32 x f32 -> f32, bf16 x bf16 -> f32 or bf16 (oneDNN uses avx512_bf16 where present and
// emulates it on plain AVX-512; before AVX-512 it has no bf16 kernels and bf16 is widened and
// computed in f32 like f16), and f16 x f16 -> f32 or f16 computed in f32 (matmul.hpp). See matmul.hpp for how alpha, beta, bias and transposes map
// onto oneDNN.
#include "ops/matmul.hpp"

#include <bit>
#include <functional>

#include <fmt/format.h>

#include "cpu_backend.hpp"
#include "kiln/errors.hpp"
#include "ops/bf16_convert.hpp"
#include "ops/dnnl_edge.hpp"
#include "ops/onednn_compat.hpp"
#include "ops/f16_convert.hpp"
#include "ops/half.hpp"
#include "parallel.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

using dt = dnnl::memory::data_type;

/// Widens an f16 or bf16 tensor into `out` (resized) and returns its data.
float* widen(const Tensor& t, std::vector<float>& out) {
  const auto* in = static_cast<const std::uint16_t*>(t.data());
  out.resize(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::bf16) {
    bf16_to_f32_parallel(in, out.data(), out.size());
  } else {
    f16_to_f32_parallel(in, out.data(), out.size());
  }
  return out.data();
}

/// Logical (rows, cols) matrix stored row-major, or its transpose stored row-major, in the
/// dtype the primitive computes `d` in.
dnnl::memory::desc matrix_desc(std::int64_t rows, std::int64_t cols, Transpose t, DType d) {
  const dnnl::memory::dims strides =
      t == Transpose::no ? dnnl::memory::dims{cols, 1} : dnnl::memory::dims{1, rows};
  return dnnl::memory::desc({rows, cols}, dnnl_dtype(d), strides);
}

}  // namespace

std::size_t MatmulKeyHash::operator()(const MatmulKey& k) const noexcept {
  std::size_t h = std::hash<std::int64_t>{}(k.m);
  auto mix = [&h](std::uint64_t v) { h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(k.n));
  mix(static_cast<std::uint64_t>(k.k));
  mix(static_cast<std::uint64_t>(k.ta) | static_cast<std::uint64_t>(k.tb) << 8 |
      static_cast<std::uint64_t>(k.ab) << 16 | static_cast<std::uint64_t>(k.c) << 24 |
      static_cast<std::uint64_t>(k.bias_dtype) << 32 | static_cast<std::uint64_t>(k.bias) << 40);
  mix(static_cast<std::uint64_t>(k.alpha_bits) << 32 | k.beta_bits);
  return h;
}

DType MatmulCache::compute(DType d) const { return compute_dtype(d, bf16_primitives_); }

MatmulCache::Entry MatmulCache::build(const MatmulKey& key) const {
  const auto a_md = matrix_desc(key.m, key.k, key.ta, compute(key.ab));
  const auto b_md = matrix_desc(key.k, key.n, key.tb, compute(key.ab));
  const auto c_md = matrix_desc(key.m, key.n, Transpose::no, compute(key.c));
  const auto bias_md = matrix_desc(1, key.n, Transpose::no, compute(key.bias_dtype));

  dnnl::primitive_attr attr;
  const float alpha = std::bit_cast<float>(key.alpha_bits);
  const float beta = std::bit_cast<float>(key.beta_bits);
  dnnl::post_ops ops;
  if (alpha != 1.0f) onednn::scale_output(attr, ops, alpha);
  if (beta != 0.0f) ops.append_sum(beta);
  const int bias_post_op_index = ops.len();
  if (key.bias == MatmulBias::post_op) ops.append_binary(dnnl::algorithm::binary_add, bias_md);
  attr.set_post_ops(ops);

  const auto pd = onednn::matmul(engine_, a_md, b_md, key.bias == MatmulBias::argument ? bias_md : dnnl::memory::desc(),
                                 c_md, attr);

  // The memories start without data; run() points them at the caller's tensors each call.
  Entry e{dnnl::matmul(pd), dnnl::memory(a_md, engine_, nullptr),
          dnnl::memory(b_md, engine_, nullptr), dnnl::memory(c_md, engine_, nullptr),
          dnnl::memory(bias_md, engine_, nullptr), {}};
  e.args = {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}};
  if (key.bias == MatmulBias::argument) e.args.emplace(DNNL_ARG_BIAS, e.bias);
  if (key.bias == MatmulBias::post_op) {
    e.args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(bias_post_op_index) | DNNL_ARG_SRC_1, e.bias);
  }
  return e;
}

void MatmulCache::run(dnnl::stream& stream, const MatmulKey& key, const Tensor& c,
                      const Tensor& a, const Tensor& b, const Tensor& bias) {
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, build(key)).first;
  Entry& e = it->second;
  const bool wide_ab = widened(key.ab), wide_c = widened(key.c);
  e.a.set_data_handle(wide_ab ? widen(a, e.a32) : a.data());
  e.b.set_data_handle(wide_ab ? widen(b, e.b32) : b.data());
  if (wide_c) {
    // beta == 0 never reads c, so only a summing product needs the old c widened.
    if (key.beta_bits != 0) {
      widen(c, e.c32);
    } else {
      e.c32.resize(static_cast<std::size_t>(c.numel()));
    }
  }
  e.c.set_data_handle(wide_c ? e.c32.data() : c.data());
  if (key.bias != MatmulBias::none) {
    e.bias.set_data_handle(widened(key.bias_dtype) ? widen(bias, e.bias32) : bias.data());
  }
  e.primitive.execute(stream, e.args);
  stream.wait();
  if (wide_c) {
    auto* out = static_cast<std::uint16_t*>(c.data());
    if (key.c == DType::bf16) {
      f32_to_bf16_parallel(e.c32.data(), out, static_cast<std::size_t>(c.numel()));
    } else {
      f32_to_f16_parallel(e.c32.data(), out, static_cast<std::size_t>(c.numel()));
    }
  }
}

void CpuBackend::matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b,
                        Transpose tb, float alpha, float beta, const Tensor& bias) {
  const OpCheck check(Op::matmul);
  const auto [m, n, k] = sdk::check_matmul(check, c, a, ta, b, tb, bias);
  MatmulKey key{m, n, k, ta, tb, a.dtype(), c.dtype(), DType::f32, MatmulBias::none,
                std::bit_cast<std::uint32_t>(alpha), std::bit_cast<std::uint32_t>(beta)};
  if (bias.defined()) {
    key.bias_dtype = bias.dtype();
    key.bias = alpha == 1.0f ? MatmulBias::argument : MatmulBias::post_op;
  }
  if (m == 0 || n == 0) return;
  if (k == 0) check.fail(fmt::format("a {} and b {} have an empty inner dimension", a.describe(), b.describe()));
  use_our_threads();
  try {
    matmuls_->run(stream_, key, c, a, b, bias);
  } catch (const dnnl::error& e) {
    check.fail(fmt::format("oneDNN failed for c {}, a {} (transposed: {}), b {} (transposed: {}), "
                           "alpha {}, beta {}, bias {}: {}",
                           c.describe(), a.describe(), ta == Transpose::yes, b.describe(),
                           tb == Transpose::yes, alpha, beta,
                           bias.defined() ? bias.describe() : "none", e.what()));
  }
}

}  // namespace kiln::cpu
