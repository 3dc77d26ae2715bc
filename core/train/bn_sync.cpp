// Rank 0's model buffers for every rank (see bn_sync.hpp for when and why).
#include "kiln/train/bn_sync.hpp"
#include "kiln/train/collective_purpose.hpp"

#include <fmt/format.h>

#include <map>

namespace kiln::train {

BufferSync::BufferSync(Backend& backend, Communicator& comm, std::span<const ModelBuffer> buffers)
    : backend_(backend), comm_(comm) {
  count_ = buffers.size();
  std::map<DType, std::vector<Tensor>> by_dtype;
  for (const ModelBuffer& b : buffers) {
    by_dtype[b.value.dtype()].push_back(b.value);
    values_ += b.value.numel();
  }
  if (comm_.size() == 1) return;  // nothing can drift
  for (auto& [dtype, tensors] : by_dtype) {
    Group g;
    std::int64_t total = 0;
    for (const Tensor& t : tensors) total += t.numel();
    g.staging = backend_.allocate({total}, dtype, MemoryKind::device);
    std::int64_t at = 0;
    for (const Tensor& t : tensors) {
      g.slots.push_back(g.staging.view(at, t.shape()));
      at += t.numel();
    }
    g.buffers = std::move(tensors);
    groups_.push_back(std::move(g));
  }
}

void BufferSync::from_rank0() {
  if (groups_.empty()) return;
  const bool root = comm_.rank() == 0;
  for (const Group& g : groups_) {
    if (root) {
      for (std::size_t i = 0; i < g.buffers.size(); ++i) backend_.copy(g.buffers[i], g.slots[i]);
    }
    // Work enqueued on the backend before a collective is visible to it (what GradSync relies
    // on for gradients too), and wait() makes the result visible to what follows.
    const CollectivePurpose purpose("rank 0's batch-norm running statistics");
    comm_.broadcast(g.staging, 0)->wait();
    if (!root) {
      for (std::size_t i = 0; i < g.buffers.size(); ++i) backend_.copy(g.slots[i], g.buffers[i]);
    }
  }
}

std::string BufferSync::describe() const {
  if (count_ == 0) return "no buffers";
  if (groups_.empty()) return fmt::format("{} buffers, one rank: nothing to synchronise", count_);
  return fmt::format("{} buffers ({} values) broadcast from rank 0 in {} collective{} before every evaluation and "
                     "checkpoint",
                     count_, values_, groups_.size(), groups_.size() == 1 ? "" : "s");
}

}  // namespace kiln::train
