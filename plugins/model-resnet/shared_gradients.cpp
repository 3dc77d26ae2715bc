// share_gradient_buffers (cnn_layers.hpp): one allocation per buffer slot for all residual blocks.
//
// Each block lists its activation-gradient buffers in a fixed order; slot i gets one allocation
// of the largest byte size any block asks for in that slot, and every block's i-th buffer becomes
// a view of it with its own shape, dtype and layout tag. The blocks' own buffers are dropped;
// they were allocated in build() but never touched, so they never became resident memory.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kiln/errors.hpp"
#include "blocks.hpp"

namespace kiln::resnet {

void share_gradient_buffers(Backend& backend, const std::vector<ResidualBlock*>& blocks) {
  std::vector<std::vector<Tensor*>> lists;
  std::size_t slots = 0;
  for (ResidualBlock* block : blocks) {
    lists.push_back(block->gradient_buffers());
    slots = std::max(slots, lists.back().size());
  }
  for (std::size_t i = 0; i < slots; ++i) {
    std::size_t bytes = 0;
    DType dtype = DType::u8;
    for (const auto& list : lists) {
      if (i < list.size() && list[i] != nullptr && list[i]->defined()) {
        bytes = std::max(bytes, list[i]->bytes());
        dtype = list[i]->dtype();
      }
    }
    if (bytes == 0) continue;
    const std::int64_t elements = static_cast<std::int64_t>((bytes + dtype_size(dtype) - 1) / dtype_size(dtype));
    const Tensor slot = backend.allocate({elements}, dtype, MemoryKind::device);
    for (const auto& list : lists) {
      if (i >= list.size() || list[i] == nullptr || !list[i]->defined()) continue;
      Tensor& t = *list[i];
      if (t.dtype() != dtype) {
        throw BackendError(fmt::format("share_gradient_buffers: gradient buffer {} of slot {} is not {}; "
                                       "blocks sharing buffers must compute in one dtype",
                                       t.describe(), i, dtype_name(dtype)));
      }
      t = Tensor(slot.storage(), t.shape(), t.dtype(), slot.offset_bytes(), t.layout());
    }
  }
}

}  // namespace kiln::resnet
