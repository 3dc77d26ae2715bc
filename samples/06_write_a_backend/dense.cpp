// Dense layers: matmul (Linear's forward and both of its gradients) and bias_grad.
//
//   matmul:    c(M, N) = alpha * op(a)(M, K) * op(b)(K, N) + beta * c [+ bias(N) on every row]
//   bias_grad: db(N) (+)= sum over the rows of dy(M, N)
//
// op(x) is x or its transpose; rather than transposing a copy, the loops read the stored
// row-major matrix at the transposed index. Each output is one dot product summed in double.
#include "naive_backend.hpp"

namespace kiln::naive {

void NaiveBackend::matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb,
                          float alpha, float beta, const Tensor& bias) {
  const OpCheck check(Op::matmul);
  const sdk::MatmulDims dims = sdk::check_matmul(check, c, a, ta, b, tb, bias);
  require_f32(Op::matmul, a.dtype());
  // With a in f32, the shared check leaves only f32 for b, c and bias as well.
  const std::int64_t m = dims.m, n = dims.n, k = dims.k;
  const float* a_data = floats(a);
  const float* b_data = floats(b);
  float* c_data = floats(c);
  const float* bias_data = bias.defined() ? floats(bias) : nullptr;

  // op(a)(i, p) and op(b)(p, j) in the stored matrices: a is (M, K), or (K, M) when transposed.
  const auto op_a = [&](std::int64_t i, std::int64_t p) {
    return ta == Transpose::no ? a_data[i * k + p] : a_data[p * m + i];
  };
  const auto op_b = [&](std::int64_t p, std::int64_t j) {
    return tb == Transpose::no ? b_data[p * n + j] : b_data[j * k + p];
  };

  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < k; ++p) sum += double{op_a(i, p)} * double{op_b(p, j)};
      double value = double{alpha} * sum;
      // beta == 0 must not read c: it may hold anything, NaN included (kiln/ops.hpp), and
      // 0 * NaN is NaN.
      if (beta != 0.0f) value += double{beta} * double{c_data[i * n + j]};
      if (bias_data != nullptr) value += double{bias_data[j]};
      c_data[i * n + j] = static_cast<float>(value);
    }
  }
}

void NaiveBackend::bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) {
  const OpCheck check(Op::bias_grad);
  sdk::check_bias_grad(check, db, dy);
  require_f32(Op::bias_grad, dy.dtype());
  const std::int64_t rows = dy.dim(0), n = dy.dim(1);
  const float* dy_data = floats(dy);
  float* db_data = floats(db);
  for (std::int64_t j = 0; j < n; ++j) {
    // A parameter gradient: Accumulate::yes adds to what earlier micro-batches left (ops.hpp).
    double sum = acc == Accumulate::yes ? double{db_data[j]} : 0.0;
    for (std::int64_t i = 0; i < rows; ++i) sum += double{dy_data[i * n + j]};
    db_data[j] = static_cast<float>(sum);
  }
}

}  // namespace kiln::naive
