// SharedSlots, share_gradient_buffers and share_forward_buffers (blocks.hpp): one allocation per
// slot for the whole model.
//
// Every layer lists its buffers with the slot each may live in; a slot gets one allocation of
// the largest byte size any buffer in it asks for, and every buffer in it becomes a view of that
// allocation with its own shape, dtype and layout tag. A layer's own buffer is released as soon
// as it is taken, so the model's build never holds it and the slot it moves into at once.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "kiln/errors.hpp"
#include "blocks.hpp"

namespace kiln::resnet {

SharedSlots::SharedSlots(std::size_t slot_count, std::string what)
    : what_(std::move(what)), bytes_(slot_count, 0), dtype_(slot_count, DType::f32), used_(slot_count, false) {}

void SharedSlots::take(std::size_t slot, Tensor& buffer) {
  if (bound_) throw BackendError(fmt::format("{}: take() after bind() (a bug in the model)", what_));
  if (slot >= bytes_.size()) throw BackendError(fmt::format("{}: slot {} does not exist", what_, slot));
  if (!buffer.defined()) return;
  if (used_[slot] && buffer.dtype() != dtype_[slot]) {
    throw BackendError(fmt::format("{}: buffer {} of slot {} is not {}; layers sharing buffers must compute in one "
                                   "dtype",
                                   what_, buffer.describe(), slot, dtype_name(dtype_[slot])));
  }
  for (const Taken& t : taken_) {
    if (t.buffer == &buffer) throw BackendError(fmt::format("{}: a buffer was taken twice (a bug in the model)", what_));
  }
  total_.apart += buffer.bytes();
  bytes_[slot] = std::max(bytes_[slot], buffer.bytes());
  dtype_[slot] = buffer.dtype();
  used_[slot] = true;
  taken_.push_back({slot, &buffer, buffer.shape(), buffer.dtype(), buffer.layout()});
  buffer = Tensor();  // its memory goes back now, not when bind() replaces it
}

SharedBytes SharedSlots::bind(Backend& backend) {
  if (bound_) throw BackendError(fmt::format("{}: bind() called twice (a bug in the model)", what_));
  bound_ = true;
  std::vector<Tensor> slots(bytes_.size());
  for (std::size_t i = 0; i < bytes_.size(); ++i) {
    if (!used_[i]) continue;
    const std::size_t size = dtype_size(dtype_[i]);
    total_.shared += bytes_[i];
    slots[i] = backend.allocate({static_cast<std::int64_t>((bytes_[i] + size - 1) / size)}, dtype_[i], MemoryKind::device);
  }
  for (const Taken& t : taken_) {
    const Tensor& slot = slots[t.slot];
    *t.buffer = Tensor(slot.storage(), t.shape, t.dtype, slot.offset_bytes(), t.layout);
  }
  return total_;
}

void share_gradient_buffers(Backend& backend, const std::vector<std::vector<GradientBuffer>>& lists) {
  SharedSlots slots(kGradSlots, "share_gradient_buffers");
  for (const auto& list : lists) slots.take_all(list);
  (void)slots.bind(backend);
}

void share_gradient_buffers(Backend& backend, const std::vector<ResidualBlock*>& blocks) {
  std::vector<std::vector<GradientBuffer>> lists;
  for (ResidualBlock* block : blocks) lists.push_back(block->gradient_buffers());
  share_gradient_buffers(backend, lists);
}

SharedBytes share_forward_buffers(Backend& backend, const std::vector<std::vector<ForwardBuffer>>& lists) {
  SharedSlots slots(kForwardSlots, "share_forward_buffers");
  for (const auto& list : lists) slots.take_all(list);
  return slots.bind(backend);
}

}  // namespace kiln::resnet
