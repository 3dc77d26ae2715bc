// matmul (cuBLASLt, dnn/gemm.hpp) and bias_grad (cuBLAS GEMM against a ones vector).
//
// Decisions: a and b are f32, bf16 or f16 (same dtype); c is f32 or a's dtype, as on the cpu
// backend (which lacks f16). The bias is f32 or c's dtype; cuBLASLt's bias epilogue reads it in
// c's dtype, so an f32 bias for a bf16/f16 c is rounded into workspace first. bias_grad is
// db(N) f32 (+)= ones(M) x dy(M, N): one cublasGemmEx with beta = 1 for Accumulate::yes, f32
// accumulation without TF32 (CUBLAS_COMPUTE_32F_PEDANTIC for f32 dy), so db is a full-precision
// master gradient whatever dy's dtype.
#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "kiln/sdk/op_args.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "dnn/dnn_check.hpp"
#include "dnn/gemm.hpp"
#include "dnn/staging.hpp"

namespace kiln::cuda {

void CudaBackend::matmul(const Tensor& c, const Tensor& a, Transpose ta, const Tensor& b,
                         Transpose tb, float alpha, float beta, const Tensor& bias) {
  const DnnCheck check(Op::matmul);
  const auto [m, n, k] = sdk::check_matmul(check, c, a, ta, b, tb, bias);
  if (m == 0 || n == 0) return;
  if (k == 0) check.fail(fmt::format("a {} and b {} have an empty inner dimension", a.describe(), b.describe()));

  Tensor bias_c = bias;
  Tensor bias_scratch;
  if (bias.defined() && bias.dtype() != c.dtype()) {
    bias_scratch = workspace(static_cast<std::size_t>(n) * dtype_size(c.dtype()));
    bias_c = typed_view(bias_scratch, c.dtype(), n);
    cast(bias_c, bias);
  }
  GemmKey key;
  key.device = device_;
  key.m = m;
  key.n = n;
  key.k = k;
  key.ta = ta;
  key.tb = tb;
  key.ab = a.dtype();
  key.c = c.dtype();
  key.bias_dtype = c.dtype();
  key.bias = bias.defined() ? GemmBias::epilogue : GemmBias::none;
  key.math = math_mode_for(a.dtype(), allow_tf32());
  key.alignment = common_alignment({a.data(), b.data(), c.data(), bias_c.defined() ? bias_c.data() : nullptr});
  gemm_plan(check, cublaslt(), key).run(*this, check, c, a, b, alpha, beta, bias_c);
}

void CudaBackend::bias_grad(const Tensor& db, const Tensor& dy, Accumulate acc) {
  const DnnCheck check(Op::bias_grad);
  sdk::check_bias_grad(check, db, dy);
  const std::int64_t m = dy.dim(0), n = dy.dim(1);
  if (n == 0) return;
  if (m == 0) {
    if (acc == Accumulate::no) fill(db, 0.0);
    return;
  }
  const Tensor ones_ws = workspace(static_cast<std::size_t>(m) * dtype_size(dy.dtype()));
  const Tensor ones = typed_view(ones_ws, dy.dtype(), m);
  fill(ones, 1.0);
  // Column-major: db^T(N, 1) = dy^T(N, M) x ones(M, 1); dy row-major (M, N) is dy^T with ld N.
  const float one = 1.0f, beta = acc == Accumulate::yes ? 1.0f : 0.0f;
  const cudaDataType_t t = cuda_dtype(dy.dtype());
  const cublasComputeType_t compute =
      dy.dtype() == DType::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  check.cublas(cublasGemmEx(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), 1,
                            static_cast<int>(m), &one, dy.data(), t, static_cast<int>(n),
                            ones.data(), t, static_cast<int>(m), &beta, db.data(), CUDA_R_32F,
                            static_cast<int>(n), compute, CUBLAS_GEMM_DEFAULT),
               [&] {
                 return fmt::format("cublasGemmEx (column sums) for db {}, dy {}, accumulate {}",
                                    db.describe(), dy.describe(), acc == Accumulate::yes);
               });
}

}  // namespace kiln::cuda
