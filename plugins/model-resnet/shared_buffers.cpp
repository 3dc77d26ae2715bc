// share_gradient_buffers and share_forward_buffers (blocks.hpp): one allocation per slot for the
// whole model.
//
// Every layer lists its buffers with the slot each may live in; a slot gets one allocation of
// the largest byte size any buffer in it asks for, and every buffer in it becomes a view of that
// allocation with its own shape, dtype and layout tag. The layers' own buffers are dropped; they
// were allocated in build() but never touched, so they never became resident memory.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kiln/errors.hpp"
#include "blocks.hpp"

namespace kiln::resnet {
namespace {

struct Slotted {
  std::size_t slot;
  Tensor* buffer;
};

/// Shares the buffers; returns {their bytes apart, the slots' bytes}.
SharedBytes share(Backend& backend, const std::vector<std::vector<Slotted>>& lists, std::size_t slot_count,
                  const char* what) {
  SharedBytes total;
  std::vector<std::size_t> bytes(slot_count, 0);
  std::vector<DType> dtype(slot_count, DType::f32);
  std::vector<bool> used(slot_count, false);
  for (const auto& list : lists) {
    for (const Slotted& g : list) {
      if (g.buffer == nullptr || !g.buffer->defined()) continue;
      const std::size_t i = g.slot;
      if (used[i] && g.buffer->dtype() != dtype[i]) {
        throw BackendError(fmt::format("{}: buffer {} of slot {} is not {}; layers sharing buffers must compute in "
                                       "one dtype",
                                       what, g.buffer->describe(), i, dtype_name(dtype[i])));
      }
      total.apart += g.buffer->bytes();
      bytes[i] = std::max(bytes[i], g.buffer->bytes());
      dtype[i] = g.buffer->dtype();
      used[i] = true;
    }
  }
  std::vector<Tensor> slots(slot_count);
  for (std::size_t i = 0; i < slot_count; ++i) {
    if (!used[i]) continue;
    const std::size_t size = dtype_size(dtype[i]);
    total.shared += bytes[i];
    slots[i] = backend.allocate({static_cast<std::int64_t>((bytes[i] + size - 1) / size)}, dtype[i], MemoryKind::device);
  }
  for (const auto& list : lists) {
    for (const Slotted& g : list) {
      if (g.buffer == nullptr || !g.buffer->defined()) continue;
      const Tensor& slot = slots[g.slot];
      Tensor& t = *g.buffer;
      t = Tensor(slot.storage(), t.shape(), t.dtype(), slot.offset_bytes(), t.layout());
    }
  }
  return total;
}

template <class Buffer>
std::vector<std::vector<Slotted>> slotted(const std::vector<std::vector<Buffer>>& lists) {
  std::vector<std::vector<Slotted>> out;
  for (const auto& list : lists) {
    out.emplace_back();
    for (const Buffer& b : list) out.back().push_back({static_cast<std::size_t>(b.slot), b.buffer});
  }
  return out;
}

}  // namespace

void share_gradient_buffers(Backend& backend, const std::vector<std::vector<GradientBuffer>>& lists) {
  (void)share(backend, slotted(lists), kGradSlots, "share_gradient_buffers");
}

void share_gradient_buffers(Backend& backend, const std::vector<ResidualBlock*>& blocks) {
  std::vector<std::vector<GradientBuffer>> lists;
  for (ResidualBlock* block : blocks) lists.push_back(block->gradient_buffers());
  share_gradient_buffers(backend, lists);
}

SharedBytes share_forward_buffers(Backend& backend, const std::vector<std::vector<ForwardBuffer>>& lists) {
  return share(backend, slotted(lists), kForwardSlots, "share_forward_buffers");
}

}  // namespace kiln::resnet
