// Model buffers (batch-norm running statistics) made identical across ranks.
//
// Gradients keep the parameters identical on every rank, but each rank updates its batch-norm
// running mean and variance from its own shard of every batch, so after the first step the
// buffers drift apart. What is evaluated and what is saved must be one model: the trainer
// therefore broadcasts rank 0's buffers before every evaluation and before every checkpoint
// (what PyTorch DDP does at the start of each forward with broadcast_buffers = true, its
// default). A checkpoint then evaluates, alone, to exactly the figures the run reported.
//
// The buffers are packed per dtype into one staging tensor on the device, so a ResNet-50's 106
// small buffers cost one broadcast, not 106.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/model.hpp"

namespace kiln::train {

class BufferSync {
 public:
  /// Allocates the staging tensors (none for one rank or a model without buffers). `buffers`
  /// must stay valid (they are views into the model's memory).
  BufferSync(Backend& backend, Communicator& comm, std::span<const ModelBuffer> buffers);

  /// Collective: every rank calls it at the same point. Afterwards every rank's buffers hold
  /// rank 0's values. A no-op for one rank.
  void from_rank0();

  /// "106 buffers (23,808 values) in 1 broadcast", or "none" / "one rank".
  std::string describe() const;

 private:
  struct Group {
    Tensor staging;                 // one device tensor holding every buffer of this dtype
    std::vector<Tensor> buffers;    // the model's buffers of this dtype
    std::vector<Tensor> slots;      // their views into `staging`, same order
  };
  Backend& backend_;
  Communicator& comm_;
  std::vector<Group> groups_;
  std::size_t count_ = 0;
  std::int64_t values_ = 0;
};

}  // namespace kiln::train
