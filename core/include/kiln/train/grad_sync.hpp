// GradSync: sums gradients over ranks, bucket by bucket, while backward is still running.
//
// Buckets are contiguous slices of the gradient arena, filled in reverse parameter order (the
// order backward produces them) up to `bucket_bytes` each. Model::backward reports each finished
// parameter (GradReadyFn); when the last parameter of a bucket is reported, that bucket's
// all-reduce is launched at once, so communication overlaps the rest of backward. finish() waits
// for all of them. The loss gradient was already divided by the global sample count, so a SUM
// over ranks yields the gradient of the mean loss over the global batch.
// A parameter backward never reports keeps its zeroed gradient; it is reduced with its bucket
// at finish() and named in a one-time warning. Frozen parameters ([model] freeze, freeze.hpp)
// belong to no bucket: a bucket never spans one, their reports are ignored, and their gradients
// are never reduced.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/model.hpp"

namespace kiln::train {

class GradSync {
 public:
  /// Plans buckets over `params` (all gradients must share one storage, as ParameterStore makes),
  /// leaving out the parameters named in `frozen`.
  GradSync(Communicator& comm, std::span<const Parameter> params, std::int64_t bucket_bytes,
           const std::set<std::string>& frozen = {});

  /// Starts a step: clears the ready marks.
  void begin_step();
  /// The callback to hand to Model::backward.
  GradReadyFn ready_callback();
  /// Launches what is left and waits for every bucket. Throws CommError.
  void finish();

  /// One element of the gradients the all-reduce sums (the first of the first bucket), for a
  /// value every rank adds to its gradients before the sum (loss_mark.hpp); undefined when every
  /// parameter is frozen.
  Tensor carrier() const;

  std::size_t num_buckets() const noexcept { return buckets_.size(); }
  std::string describe() const;

 private:
  struct Bucket {
    Tensor slice;
    std::size_t total = 0;    // parameters in the bucket
    std::size_t pending = 0;  // not yet reported this step
    std::unique_ptr<Work> work;
  };
  void mark_ready(std::size_t param_index);
  void launch(Bucket& b);

  Communicator& comm_;
  std::span<const Parameter> params_;
  std::vector<Bucket> buckets_;
  static constexpr std::size_t kNoBucket = static_cast<std::size_t>(-1);  // a frozen parameter's
  std::vector<std::size_t> bucket_of_;    // parameter index -> bucket (or kNoBucket)
  std::vector<std::uint8_t> reported_;
  bool warned_ = false;
};

}  // namespace kiln::train
