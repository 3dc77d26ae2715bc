// Keys and caches for the per-shape choices of the cuDNN / cuBLASLt ops, in plain C++ (no CUDA
// types) so the lookup logic is unit-tested in CI without a GPU (tests/cuda-dnn/test_algo_key).
//
// Decisions: a key holds everything that changes which algorithm is valid or fastest (device,
// direction, every size, dtype, working layout, math mode, search method, and for GEMM the
// pointer alignment), so two layers with equal shapes share one choice and a change of any field
// never reuses a stale one. The cache is process-wide and mutex-guarded (plans may be made from
// several models in one process); a choice is computed once per key and never evicted (a run
// has a few dozen distinct shapes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// Which of the three convolution computations a choice is for.
enum class ConvDirection : std::uint8_t { forward = 0, backward_data = 1, backward_filter = 2 };
std::string_view conv_direction_name(ConvDirection d) noexcept;

/// Which arithmetic a convolution or GEMM may use.
enum class MathMode : std::uint8_t {
  fp32 = 0,       ///< strict f32 FMA (no tensor cores)
  tf32 = 1,       ///< f32 data, TF32 tensor cores allowed ([backend] allow_tf32)
  tensor_op = 2,  ///< f16/bf16 data on tensor cores, f32 accumulation
  /// strict f32 FMA like fp32, but convolutions may use cuDNN's Winograd and FFT algorithms, whose
  /// transforms add f32 rounding ([backend] conv_transforms; the cpu backend's Winograd does the same)
  fp32_transforms = 3,
};
std::string_view math_mode_name(MathMode m) noexcept;
/// Whether `m` keeps f32 data on the FMA units (no tensor cores): fp32 and fp32_transforms.
bool fma_math(MathMode m) noexcept;
/// The math mode for data of `dtype`: tensor_op for f16/bf16; for f32 tf32 where allowed, else
/// fp32_transforms where convolution transforms are allowed, else fp32.
MathMode math_mode_for(DType dtype, bool allow_tf32, bool conv_transforms = false) noexcept;

/// How a convolution algorithm is chosen: cuDNN's heuristics (instant) or by timing (cudnnFind).
enum class AlgoSearch : std::uint8_t { heuristic = 0, exhaustive = 1 };

/// Default of [backend] conv_workspace_mib: the most workspace one convolution algorithm may use.
inline constexpr std::int64_t kDefaultConvWorkspaceMib = 1024;
/// Its largest accepted value (1 TiB, beyond any GPU's memory; the byte count stays far inside
/// size_t). The schema's bound in plugin.cpp says the same.
inline constexpr std::int64_t kMaxConvWorkspaceMib = std::int64_t{1} << 20;

/// One convolution problem as cuDNN sees it.
struct ConvAlgoKey {
  int device = 0;
  ConvDirection direction = ConvDirection::forward;
  std::int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;
  DType dtype = DType::f32;           ///< data dtype of x, w, y as cuDNN gets them
  Layout layout = Layout::row_major;  ///< working layout (row_major = NCHW/OIHW, nhwc = NHWC/KRSC)
  MathMode math = MathMode::fp32;
  AlgoSearch search = AlgoSearch::heuristic;
  std::int64_t workspace_mib = kDefaultConvWorkspaceMib;  ///< the largest workspace a choice may use

  bool operator==(const ConvAlgoKey&) const = default;
  /// "forward f16 nhwc tensor_op x(256, 64, 56, 56) k=64 3x3 stride 1x1 pad 1x1 dilation 1x1
  /// groups 1 on device 0 (heuristic, workspace <= 1024 MiB)", for messages and logs.
  std::string describe() const;
};

/// The key of `d` for `direction` on `device` in `layout` with `math`.
ConvAlgoKey conv_algo_key(const Conv2dDesc& d, ConvDirection direction, int device, Layout layout,
                          MathMode math, AlgoSearch search = AlgoSearch::heuristic,
                          std::int64_t workspace_mib = kDefaultConvWorkspaceMib);

struct ConvAlgoKeyHash {
  std::size_t operator()(const ConvAlgoKey& k) const noexcept;
};

/// What was chosen: cuDNN's algorithm enum value, the math type to run it with and the workspace
/// it needs (plain ints so this header stays CUDA-free).
struct AlgoChoice {
  int algo = 0;
  int math_type = 0;
  std::size_t workspace_bytes = 0;
  bool operator==(const AlgoChoice&) const = default;
};

/// Process-wide map from problem to choice. Thread-safe.
class AlgoCache {
 public:
  /// The cached choice for `key`, or `select()`'s result, which is stored first. `select` runs
  /// at most once per key (under the lock: choices are made at plan time, not in the hot loop).
  /// If it throws, nothing is stored and the exception propagates.
  AlgoChoice get_or_select(const ConvAlgoKey& key, const std::function<AlgoChoice()>& select);
  /// The cached choice, if any (no selection).
  std::optional<AlgoChoice> find(const ConvAlgoKey& key) const;
  /// Stores `choice` for `key`, replacing what was there (a plan whose cached algorithm cuDNN
  /// refused at run time records the candidate that worked, so later plans start with it).
  void store(const ConvAlgoKey& key, const AlgoChoice& choice);

  std::size_t size() const;
  /// Lookups answered from the cache / that had to select.
  std::size_t hits() const;
  std::size_t misses() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::unordered_map<ConvAlgoKey, AlgoChoice, ConvAlgoKeyHash> map_;
  std::size_t hits_ = 0, misses_ = 0;
};

/// The cache every CudaBackend in this process shares.
AlgoCache& conv_algo_cache();

/// Whether the cuBLASLt bias epilogue is used or the bias is absent.
enum class GemmBias : std::uint8_t { none = 0, epilogue = 1 };

/// One cuBLASLt problem in Kiln's row-major terms: c(M, N) = op(a)(M, K) op(b)(K, N).
struct GemmKey {
  int device = 0;
  std::int64_t m = 0, n = 0, k = 0;
  Transpose ta = Transpose::no, tb = Transpose::no;
  DType ab = DType::f32, c = DType::f32, bias_dtype = DType::f32;
  GemmBias bias = GemmBias::none;
  MathMode math = MathMode::fp32;
  /// Largest power of two (<= 16) dividing every operand address: cuBLASLt's heuristics assume
  /// 16-byte aligned operands unless told, so views at odd offsets get their own algorithm.
  std::uint32_t alignment = 16;

  bool operator==(const GemmKey&) const = default;
  std::string describe() const;
};

struct GemmKeyHash {
  std::size_t operator()(const GemmKey& k) const noexcept;
};

/// Largest power of two <= 16 dividing every one of the addresses (null addresses are ignored).
std::uint32_t common_alignment(std::initializer_list<const void*> addresses) noexcept;

}  // namespace kiln::cuda
