// cuBLASLt GEMM in Kiln's row-major terms, with the chosen algorithm cached per problem.
//
// Decisions: a row-major c(M, N) is the column-major matrix c^T(N, M), so c^T = op(b)^T op(a)^T
// is computed: cuBLASLt's A is Kiln's b (TRANSA = tb) and its B is Kiln's a (TRANSB = ta), no
// copies. The bias(N) is then a per-row vector of the column-major D, which is exactly what
// CUBLASLT_EPILOGUE_BIAS broadcasts (D = alpha*op(A)op(B) + beta*C + bias, the bias unscaled).
// f16/bf16 inputs run on tensor cores with f32 accumulation and f32 alpha/beta; f32 inputs use
// CUBLAS_COMPUTE_32F_FAST_TF32 only when the backend allows TF32. Each problem (GemmKey: sizes,
// transposes, dtypes, bias, math, operand alignment, device) gets its descriptors and its
// heuristic's first algorithm built once; if cuBLASLt offers none with the bias epilogue, the
// plan runs without it and the bias is added by a rank-1 cublasGemmEx update instead.
#pragma once

#include <cstddef>
#include <mutex>

#include <cublasLt.h>

#include "cuda_backend.hpp"
#include "dnn/algo_key.hpp"
#include "dnn/dnn_check.hpp"

namespace kiln::cuda {

/// Largest workspace cuBLASLt's heuristics may ask for (NVIDIA's recommendation for Hopper).
inline constexpr std::size_t kGemmWorkspace = std::size_t{32} << 20;

class GemmPlan {
 public:
  GemmPlan(const DnnCheck& check, cublasLtHandle_t handle, const GemmKey& key);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  /// Enqueues c = alpha * op(a) op(b) + beta * c (+ bias, when the key has one; bias already in
  /// c's dtype) on the backend's compute stream.
  void run(CudaBackend& backend, const DnnCheck& check, const Tensor& c, const Tensor& a,
           const Tensor& b, float alpha, float beta, const Tensor& bias);

  const GemmKey key;
  /// Whether the bias is added by the epilogue (false: by a separate rank-1 update).
  bool bias_fused() const noexcept { return bias_fused_; }

 private:
  bool try_build(const DnnCheck& check, cublasLtHandle_t handle, GemmBias bias);
  void destroy() noexcept;

  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  bool bias_fused_ = false;
  std::mutex bias_mutex_;  // held from setting BIAS_POINTER on op_ until cublasLtMatmul has read it
};

/// The process-wide plan for `key` (built on first use; never evicted). Thread-safe lookup; run()
/// may be called from several threads (backends) at once. A plan that fails to build frees its
/// descriptors and is not stored.
GemmPlan& gemm_plan(const DnnCheck& check, cublasLtHandle_t handle, const GemmKey& key);

/// cuBLAS's data type for f32, f16 and bf16.
cudaDataType_t cuda_dtype(DType dtype) noexcept;

}  // namespace kiln::cuda
