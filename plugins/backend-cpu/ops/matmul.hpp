// Cache of oneDNN matmul primitives, one per problem (shape, transposes, dtypes, alpha, beta,
// bias), so the steady state creates nothing: a training step reuses the primitive and the
// dnnl::memory wrappers built on first use and only swaps their data pointers.
//
// Decisions: transposes are expressed with memory-descriptor strides (no copies); beta != 0 is
// the `sum` post-op (scale beta); alpha is a static output scale. oneDNN applies output scales
// after the bias argument, so with alpha != 1 the bias becomes a binary-add post-op after the sum
// instead, keeping c = alpha * op(a) op(b) + beta * c + bias. alpha and beta are part of the key:
// a training run uses one or two values, and static scales are the fastest oneDNN path. f16
// operands are storage only (this CPU has no f16 arithmetic): they are widened into f32 scratch
// owned by the cache entry, the primitive runs in f32, and an f16 c is rounded back once. bf16
// operands take the same path when the backend has no bf16 primitives (compute_dtype,
// dnnl_edge.hpp); otherwise oneDNN reads them directly.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cpu {

/// How the bias reaches the primitive.
enum class MatmulBias : std::uint8_t { none, argument, post_op };

struct MatmulKey {
  std::int64_t m = 0, n = 0, k = 0;
  Transpose ta = Transpose::no, tb = Transpose::no;
  DType ab = DType::f32, c = DType::f32, bias_dtype = DType::f32;
  MatmulBias bias = MatmulBias::none;
  std::uint32_t alpha_bits = 0, beta_bits = 0;
  bool operator==(const MatmulKey&) const = default;
};

struct MatmulKeyHash {
  std::size_t operator()(const MatmulKey& k) const noexcept;
};

class MatmulCache {
 public:
  /// `bf16_primitives`: oneDNN computes bf16 here (false: bf16 operands are widened to f32).
  MatmulCache(dnnl::engine engine, bool bf16_primitives)
      : engine_(std::move(engine)), bf16_primitives_(bf16_primitives) {}

  /// Runs c = alpha * op(a) op(b) + beta * c (+ bias) on `stream` and waits for it. Arguments
  /// are already validated; `key` describes them.
  void run(dnnl::stream& stream, const MatmulKey& key, const Tensor& c, const Tensor& a,
           const Tensor& b, const Tensor& bias);

  /// Number of distinct primitives built so far (tests check that repeats reuse them).
  std::size_t size() const noexcept { return cache_.size(); }

 private:
  struct Entry {
    dnnl::matmul primitive;
    dnnl::memory a, b, c, bias;
    std::unordered_map<int, dnnl::memory> args;
    std::vector<float> a32, b32, c32, bias32;  // f16 (or widened bf16) operands in f32 (empty otherwise)
  };
  Entry build(const MatmulKey& key) const;
  /// The dtype the primitive computes a `d` operand in, and whether it differs (a widened operand).
  DType compute(DType d) const;
  bool widened(DType d) const { return compute(d) != d; }

  dnnl::engine engine_;
  bool bf16_primitives_;
  std::unordered_map<MatmulKey, Entry, MatmulKeyHash> cache_;
};

}  // namespace kiln::cpu
