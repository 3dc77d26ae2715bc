// When a convolution's backward-data call may read the filter copy its forward made, instead of
// laying the weights out again.
//
// Why: a channels-last (NHWC) plan makes cuDNN read the filter in KRSC order and in the plan's
// dtype, while weights sit in the caller's memory as OIHW (kiln/backend.hpp). conv2d_forward
// converts them into a copy the plan owns; the conv2d_backward_data call that follows it reads
// that copy, so each training step converts a layer's weights once instead of twice.
//
// Why it is safe: the copy serves only the ONE backward-data call that directly follows the plan's
// last forward, for the very same weight tensor (address, element count, dtype) and the same
// working layout and dtype. Between a layer's forward and its backward nobody writes parameters:
// the trainer's step is before_forward (casts the compute copies) -> forward -> loss -> backward
// -> gradient sync -> optimizer (core/train/trainer.cpp), and gradient accumulation only repeats
// forward/backward pairs between optimizer steps. Every other writer of parameters (optimizer
// ops, precision casts, checkpoint load, [model] init, a communicator's broadcast at start or
// after a restore) runs outside that window, and the next forward makes a new copy. The backward
// is the gradient of THAT forward (kiln/model.hpp), so reading the forward's weights is what it
// means. tests/train/test_conv_filter_reuse.cpp checks the window on the CPU over real training
// (every precision, accumulation, evaluation, checkpoint resume): the weight bytes at each
// backward-data call this ledger lets reuse equal those at the forward that made the copy.
//
// Plain C++ (no CUDA) so the rules are unit-tested without a device (tests/cuda-dnn).
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// A filter operand as one convolution call reads it.
struct FilterUse {
  const void* data = nullptr;  ///< the caller's weight bytes (device address, offset included)
  std::int64_t numel = 0;
  DType dtype = DType::f32;             ///< the caller's weight dtype (f32 master, or the compute copy)
  DType want_dtype = DType::f32;        ///< the plan's compute dtype
  Layout want_layout = Layout::row_major;  ///< the call's working layout (nhwc: KRSC filter)

  friend bool operator==(const FilterUse&, const FilterUse&) = default;
};

/// The state of one plan's filter copy.
class FilterCopyLedger {
 public:
  /// A forward starts: whatever the copy held no longer counts (a forward that reads the weights
  /// in place, or fails before its conversion finished, leaves no usable copy).
  void forward_begins() noexcept { held_.reset(); }
  /// The forward's conversion of `use` into the copy has been enqueued.
  void copy_made(const FilterUse& use) noexcept { held_ = use; }
  /// Whether a backward-data call reading `use` may read the copy instead. True at most once per
  /// copy_made(), and only for an identical use; the copy is released either way, so a second
  /// backward-data call, or one for other weights, converts again.
  bool take_for_backward(const FilterUse& use) noexcept {
    const bool ok = held_.has_value() && *held_ == use;
    held_.reset();
    return ok;
  }
  /// Whether a copy is held (for tests and messages).
  bool holds() const noexcept { return held_.has_value(); }

 private:
  std::optional<FilterUse> held_;
};

}  // namespace kiln::cuda
