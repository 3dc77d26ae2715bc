// BatchNormReserve: the bookkeeping of the reserve space that cuDNN's batch-norm Ex calls share
// between a training forward and its backward (cudnnBatchNormalizationForwardTrainingEx writes
// it, cudnnBatchNormalizationBackwardEx reads it).
//
// Why a ledger: the Backend contract passes save_mean/save_invstd from forward to backward as
// tensors, but has no slot for an opaque reserve buffer, so the plan (one per layer) keeps it. A
// backward may only read a reserve that its own forward wrote: the ledger records which x the
// last forward ran on and refuses a backward on another x with a message saying so, instead of
// handing cuDNN stale bytes. When cuDNN asks for no reserve (its size query returns 0, which is
// the case for plain batch-norm in most cuDNN builds) there is nothing to pair and any backward
// is fine. Plain C++ (no CUDA), tested in CI; the device bytes live in the op's plan.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace kiln::cuda {

class BatchNormReserve {
 public:
  /// cuDNN's reserve size for the current mode. A change (the plan fell back from persistent
  /// to spatial) forgets the last forward: its bytes were written for the other mode.
  void set_required(std::size_t bytes) noexcept;
  std::size_t required() const noexcept { return required_; }

  /// Whether the held buffer (of `held` bytes) must be replaced by one of required() bytes.
  bool must_grow(std::size_t held) const noexcept { return held < required_; }

  /// A training forward on `x` has written the reserve.
  void forward_wrote(const void* x) noexcept { written_for_ = x; }

  /// Why a backward on `x`, whose mode needs `bytes_needed` of reserve, cannot use the reserve
  /// (nullopt when it can: nothing needed, or the last forward wrote it for this x and size).
  std::optional<std::string> backward_problem(const void* x, std::size_t bytes_needed) const;

 private:
  std::size_t required_ = 0;
  const void* written_for_ = nullptr;
};

}  // namespace kiln::cuda
