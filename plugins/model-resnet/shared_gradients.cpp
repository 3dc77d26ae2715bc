// share_gradient_buffers (blocks.hpp): one allocation per GradSlot for the whole model.
//
// Every layer lists its activation-gradient buffers with the slot each may live in; a slot gets
// one allocation of the largest byte size any buffer in it asks for, and every buffer in it
// becomes a view of that allocation with its own shape, dtype and layout tag. The layers' own
// buffers are dropped; they were allocated in build() but never touched, so they never became
// resident memory.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "kiln/errors.hpp"
#include "blocks.hpp"

namespace kiln::resnet {

void share_gradient_buffers(Backend& backend, const std::vector<std::vector<GradientBuffer>>& lists) {
  std::array<std::size_t, kGradSlots> bytes{};
  std::array<DType, kGradSlots> dtype{};
  std::array<bool, kGradSlots> used{};
  for (const auto& list : lists) {
    for (const GradientBuffer& g : list) {
      if (g.buffer == nullptr || !g.buffer->defined()) continue;
      const auto i = static_cast<std::size_t>(g.slot);
      if (used[i] && g.buffer->dtype() != dtype[i]) {
        throw BackendError(fmt::format("share_gradient_buffers: gradient buffer {} of slot {} is not {}; "
                                       "layers sharing buffers must compute in one dtype",
                                       g.buffer->describe(), i, dtype_name(dtype[i])));
      }
      bytes[i] = std::max(bytes[i], g.buffer->bytes());
      dtype[i] = g.buffer->dtype();
      used[i] = true;
    }
  }
  std::array<Tensor, kGradSlots> slots;
  for (std::size_t i = 0; i < kGradSlots; ++i) {
    if (!used[i]) continue;
    const std::size_t size = dtype_size(dtype[i]);
    slots[i] = backend.allocate({static_cast<std::int64_t>((bytes[i] + size - 1) / size)}, dtype[i], MemoryKind::device);
  }
  for (const auto& list : lists) {
    for (const GradientBuffer& g : list) {
      if (g.buffer == nullptr || !g.buffer->defined()) continue;
      const Tensor& slot = slots[static_cast<std::size_t>(g.slot)];
      Tensor& t = *g.buffer;
      t = Tensor(slot.storage(), t.shape(), t.dtype(), slot.offset_bytes(), t.layout());
    }
  }
}

void share_gradient_buffers(Backend& backend, const std::vector<ResidualBlock*>& blocks) {
  std::vector<std::vector<GradientBuffer>> lists;
  for (ResidualBlock* block : blocks) lists.push_back(block->gradient_buffers());
  share_gradient_buffers(backend, lists);
}

}  // namespace kiln::resnet
