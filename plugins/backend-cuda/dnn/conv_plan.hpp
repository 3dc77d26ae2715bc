// The OpPlan of a cuDNN convolution: descriptors for each working layout it is used in and the
// algorithms chosen for forward, backward-data and backward-filter.
//
// Decisions: descriptors are made lazily per working layout (NCHW/OIHW or NHWC/KRSC; layers use
// one, tests use both) in the plan's dtype with f32 accumulation (cuDNN's compute type FLOAT for
// f32, f16 and bf16 data). cuDNN takes symmetric padding and floors the output size exactly as
// Conv2dDesc::out_h/out_w do, so the cpu backend's "far padding" (the smallest that gives that
// output) needs no special handling: the extra far rows are never read; the plan checks that
// cuDNN's output size agrees. Algorithms come from cuDNN's _v7 heuristics (first result that
// succeeds, fits the workspace limit ([backend] conv_workspace_mib, part of the cache key) and
// keeps the math mode: no TF32 unless allowed, never f32 data
// converted to f16, no FFT or Winograd in a strict-fp32 plan: dnn/dnn_policy.hpp), cached
// process-wide per problem (algo_key.hpp). With [backend] cudnn_benchmark the candidates come from
// cudnnFind* instead, which runs every algorithm once on scratch buffers cuDNN allocates itself and
// ranks them by measured time (the same filters apply; the search method is part of the cache key). If cuDNN refuses the chosen algorithm when it runs
// (conv_retry_on), run() tries the next usable candidate in heuristic order, remembers the
// refused ones in the plan and stores the one that worked in the process-wide cache.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda_backend.hpp"
#include "dnn/algo_key.hpp"
#include "dnn/cudnn_desc.hpp"
#include "kiln/sdk/op_descs.hpp"
#include "dnn/dnn_check.hpp"
#include "dnn/dnn_policy.hpp"
#include "dnn/filter_copy.hpp"

namespace kiln::cuda {

class ConvPlan final : public OpPlan {
 public:
  ConvPlan(const Conv2dDesc& d, int device, MathMode math, AlgoSearch search = AlgoSearch::heuristic,
           std::int64_t workspace_mib = kDefaultConvWorkspaceMib);

  /// cuDNN's view of the problem in one working layout.
  struct Setup {
    TensorDesc x, y;
    FilterDesc w;
    ConvDesc conv;
    std::array<std::optional<AlgoChoice>, 3> algos;  // by ConvDirection
    std::array<std::vector<int>, 3> failed;          // algorithms refused at run time, by ConvDirection
  };

  /// The descriptors for `layout` (made on first use).
  Setup& setup(const DnnCheck& check, Layout layout);
  /// The algorithm for `direction` in `layout` (from the process-wide cache, selected on first
  /// use), with the conv descriptor's math type set to run it.
  AlgoChoice algo(const DnnCheck& check, cudnnHandle_t handle, Setup& s, Layout layout,
                  ConvDirection direction);

  /// Runs `call(choice)` (a cuDNN convolution call returning its status) with the algorithm for
  /// `direction`. A status conv_retry_on() accepts moves on to the next usable candidate (see
  /// the header); any other failure, or none left, throws BackendError with `describe(choice)`
  /// and every attempt. Nothing is allocated unless a retry happens.
  template <class Call, class Describe>
  void run(const DnnCheck& check, cudnnHandle_t handle, Setup& s, Layout layout, ConvDirection direction,
           Call&& call, Describe&& describe) {
    const AlgoChoice first = algo(check, handle, s, layout, direction);
    const cudnnStatus_t status = call(first);
    if (status == CUDNN_STATUS_SUCCESS) return;
    if (!conv_retry_on(status)) check.cudnn(status, [&] { return describe(first); });
    retry(check, handle, s, layout, direction, first, status, std::function<cudnnStatus_t(const AlgoChoice&)>(call),
          std::function<std::string(const AlgoChoice&)>(describe));
  }

  const Conv2dDesc desc;
  const int device;
  const MathMode math;
  const AlgoSearch search;  ///< heuristic: cuDNN's _v7 ranking; exhaustive: cudnnFind* timing
  /// Largest workspace a chosen algorithm may use; faster ones above it are skipped (and logged).
  const std::int64_t workspace_mib;
  Dims4 x_dims, y_dims, w_dims;
  /// The weights as the last forward's cuDNN call read them when that needed a conversion (KRSC
  /// and/or the plan's dtype), kept for the backward-data call that follows (dnn/filter_copy.hpp).
  /// Allocated on first use; undefined while no forward needed one.
  Tensor filter_copy;
  FilterCopyLedger filter_ledger;

 private:
  void retry(const DnnCheck& check, cudnnHandle_t handle, Setup& s, Layout layout, ConvDirection direction,
             const AlgoChoice& first, cudnnStatus_t status, const std::function<cudnnStatus_t(const AlgoChoice&)>& call,
             const std::function<std::string(const AlgoChoice&)>& describe);

  std::array<std::unique_ptr<Setup>, 2> setups_;  // by Layout (row_major, nhwc)
};

/// "conv2d f16 x(256, 64, 56, 56) k=64 3x3 stride 1x1 pad 1x1 dilation 1x1 groups 1".
using sdk::describe;  // "conv2d f32 x(...) k=... " (kiln/sdk/op_descs.hpp)

}  // namespace kiln::cuda
