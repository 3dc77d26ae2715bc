// LossMark: every rank learns from the gradients' own all-reduce whether any rank's loss went
// inf or NaN, so the loss check needs no collective of its own (loss_guard.hpp).
//
// Why: with several ranks, the check used to sum one flag over them at every checked step, a
// second all-reduce next to the gradients'. For a step as short as the main job's (0.3 ms) that
// round trip cost a fifth of the throughput on 2 ranks (docs/distributed.md).
//
// How: before a checked step's gradients are summed, each rank adds its running loss sum times
// zero to one gradient element (GradSync::carrier()): + 0 when the loss is finite, which leaves
// the gradient as it was, and NaN when it is inf or NaN (inf x 0 and NaN x 0 are NaN). A NaN
// survives a sum in any order, and after the all-reduce every rank holds the same element: either
// every rank sees NaN or none does, so every rank takes the same path. A clean element proves every
// rank's loss finite. A NaN one may also come from the gradients themselves (an fp16 overflow the
// loss scaler skips): then the ranks run the check's own all-reduce to learn whose loss, if any,
// went non-finite. The cost is three one-element ops and one element read per check.
#pragma once

#include <memory>

#include "kiln/backend.hpp"
#include "kiln/tensor.hpp"

namespace kiln::train {

class LossMark {
 public:
  /// A mark carried by `carrier`, one f32 element of a gradient that the all-reduce sums. Null
  /// when there is no carrier (every parameter frozen), it is not f32, or `backend` lacks f32
  /// scale or add: the check then asks the other ranks.
  static std::unique_ptr<LossMark> make(Backend& backend, const Tensor& carrier);

  /// Before the carrier's bucket is all-reduced: carrier += loss_sum x 0, where loss_sum is this
  /// rank's running loss sum (f32, 1 element, device memory).
  void add(const Tensor& loss_sum);
  /// After the all-reduce: whether the summed carrier is NaN (one element read to the host).
  bool nan_after_sum();

 private:
  LossMark(Backend& backend, const Tensor& carrier);
  Backend& backend_;
  Tensor carrier_;
  Tensor zero_or_nan_;  // loss_sum x 0, device
  Tensor host_;         // the carrier read back
};

}  // namespace kiln::train
