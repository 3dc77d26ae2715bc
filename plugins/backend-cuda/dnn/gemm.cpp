// GemmPlan (gemm.hpp): cuBLASLt descriptors, heuristic algorithm choice and the matmul call.
#include "dnn/gemm.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "dnn/staging.hpp"

namespace kiln::cuda {
namespace {

cublasComputeType_t compute_type(MathMode m) {
  return m == MathMode::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

cublasOperation_t op_of(Transpose t) { return t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

cudaDataType_t cuda_dtype(DType dtype) noexcept {
  switch (dtype) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

GemmPlan::GemmPlan(const DnnCheck& check, cublasLtHandle_t handle, const GemmKey& k) : key(k) {
  // A constructor that throws never runs the destructor: every exit by exception (a failed
  // cuBLASLt call inside try_build, or no algorithm at all) destroys what was created first.
  try {
    if (key.bias == GemmBias::epilogue && try_build(check, handle, GemmBias::epilogue)) {
      bias_fused_ = true;
      return;
    }
    destroy();
    if (!try_build(check, handle, GemmBias::none)) {
      check.fail_library(fmt::format("cuBLASLt offers no algorithm for {}; try another dtype",
                                     key.describe()));
    }
  } catch (...) {
    destroy();
    throw;
  }
}

GemmPlan::~GemmPlan() { destroy(); }

void GemmPlan::destroy() noexcept {
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  op_ = nullptr;
  a_ = b_ = c_ = nullptr;
}

bool GemmPlan::try_build(const DnnCheck& check, cublasLtHandle_t handle, GemmBias bias) {
  const auto what = [&](const char* call) { return fmt::format("{} for {}", call, key.describe()); };
  const auto u64 = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  check.cublas(cublasLtMatmulDescCreate(&op_, compute_type(key.math), CUDA_R_32F),
               [&] { return what("cublasLtMatmulDescCreate"); });
  const cublasOperation_t transa = op_of(key.tb), transb = op_of(key.ta);
  check.cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)),
               [&] { return what("cublasLtMatmulDescSetAttribute(TRANSA)"); });
  check.cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)),
               [&] { return what("cublasLtMatmulDescSetAttribute(TRANSB)"); });
  if (bias == GemmBias::epilogue) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check.cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
                 [&] { return what("cublasLtMatmulDescSetAttribute(EPILOGUE)"); });
  }
  // cuBLASLt's A is Kiln's b: stored (K, N) row-major = (N, K) column-major, or transposed.
  const cudaDataType_t ab = cuda_dtype(key.ab), cd = cuda_dtype(key.c);
  if (key.tb == Transpose::no) {
    check.cublas(cublasLtMatrixLayoutCreate(&a_, ab, u64(key.n), u64(key.k), key.n), [&] { return what("layout A"); });
  } else {
    check.cublas(cublasLtMatrixLayoutCreate(&a_, ab, u64(key.k), u64(key.n), key.k), [&] { return what("layout A"); });
  }
  if (key.ta == Transpose::no) {
    check.cublas(cublasLtMatrixLayoutCreate(&b_, ab, u64(key.k), u64(key.m), key.k), [&] { return what("layout B"); });
  } else {
    check.cublas(cublasLtMatrixLayoutCreate(&b_, ab, u64(key.m), u64(key.k), key.m), [&] { return what("layout B"); });
  }
  check.cublas(cublasLtMatrixLayoutCreate(&c_, cd, u64(key.n), u64(key.m), key.n), [&] { return what("layout C"); });

  cublasLtMatmulPreference_t pref = nullptr;
  check.cublas(cublasLtMatmulPreferenceCreate(&pref), [&] { return what("cublasLtMatmulPreferenceCreate"); });
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      pref_guard(pref, &cublasLtMatmulPreferenceDestroy);
  const std::uint64_t ws = kGemmWorkspace;
  const std::uint32_t align = key.alignment;
  check.cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
               [&] { return what("preference MAX_WORKSPACE_BYTES"); });
  for (const auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    check.cublas(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)),
                 [&] { return what("preference MIN_ALIGNMENT"); });
  }
  int returned = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(handle, op_, a_, b_, c_, c_, pref, 1, &heuristic_, &returned);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  check.cublas(s, [&] { return what("cublasLtMatmulAlgoGetHeuristic"); });
  return returned > 0 && heuristic_.state == CUBLAS_STATUS_SUCCESS;
}

void GemmPlan::run(CudaBackend& backend, const DnnCheck& check, const Tensor& c, const Tensor& a,
                   const Tensor& b, float alpha, float beta, const Tensor& bias) {
  const auto what = [&](const char* call) {
    return fmt::format("{} for {} with c {}, a {}, b {}, alpha {}, beta {}, bias {}", call,
                       key.describe(), c.describe(), a.describe(), b.describe(), alpha, beta,
                       bias.defined() ? bias.describe() : "none");
  };
  const std::size_t ws_bytes = heuristic_.workspaceSize;
  const Tensor ws = ws_bytes > 0 ? backend.workspace(ws_bytes) : Tensor();
  {
    // The plan (and op_) is shared by every backend in the process; the bias pointer is per call.
    // cublasLtMatmul reads the descriptor when it enqueues, so setting the pointer and enqueueing
    // under one lock keeps another thread's bias out of this call.
    const std::lock_guard lock(bias_mutex_);
    if (bias_fused_) {
      const void* ptr = bias.data();
      check.cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof(ptr)),
                   [&] { return what("cublasLtMatmulDescSetAttribute(BIAS_POINTER)"); });
    }
    check.cublas(cublasLtMatmul(backend.cublaslt(), op_, &alpha, b.data(), a_, a.data(), b_, &beta,
                                c.data(), c_, c.data(), c_, &heuristic_.algo,
                                ws.defined() ? ws.data() : nullptr, ws_bytes, backend.compute_stream()),
                 [&] { return what("cublasLtMatmul"); });
  }
  if (key.bias == GemmBias::none || bias_fused_) return;
  // Unfused bias: c^T(N, M) += bias(N, 1) x ones(1, M), all in c's dtype, f32 accumulation.
  const Tensor ones_ws = backend.workspace(static_cast<std::size_t>(key.m) * dtype_size(key.c));
  const Tensor ones = typed_view(ones_ws, key.c, key.m);
  backend.fill(ones, 1.0);
  const float one = 1.0f;
  const cudaDataType_t t = cuda_dtype(key.c);
  check.cublas(cublasGemmEx(backend.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(key.n),
                            static_cast<int>(key.m), 1, &one, bias.data(), t, static_cast<int>(key.n),
                            ones.data(), t, 1, &one, c.data(), t, static_cast<int>(key.n),
                            CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
               [&] { return what("cublasGemmEx (bias rank-1 update)"); });
}

GemmPlan& gemm_plan(const DnnCheck& check, cublasLtHandle_t handle, const GemmKey& key) {
  static std::mutex mutex;
  static auto* plans = new std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash>;
  const std::lock_guard lock(mutex);
  auto it = plans->find(key);
  if (it == plans->end()) it = plans->emplace(key, std::make_unique<GemmPlan>(check, handle, key)).first;
  return *it->second;
}

}  // namespace kiln::cuda
