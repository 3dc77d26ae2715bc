// SharedSlots and StageArena (shared_buffers.hpp), share_gradient_buffers (blocks.hpp).
//
// Every layer lists its buffers with the slot each may live in; a slot gets one piece of memory
// of the largest byte size any buffer in it asks for, and every buffer in it becomes a view of
// it with its own shape, dtype and layout tag. A layer's own buffer is released as soon as it is
// taken, so the model's build never holds it and the slot it moves into at once.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "kiln/errors.hpp"
#include "blocks.hpp"

namespace kiln::resnet {
namespace {

/// Where buffers start inside shared memory: cuDNN and the cpu backend's vector loops want their
/// operands aligned, and 256 bytes is what cudaMalloc itself guarantees.
constexpr std::size_t kBufferAlignment = 256;

std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

SharedSlots::SharedSlots(std::size_t slot_count, std::string what)
    : what_(std::move(what)), bytes_(slot_count, 0), dtype_(slot_count, DType::f32), used_(slot_count, false) {}

void SharedSlots::take(std::size_t slot, Tensor& buffer) {
  if (bound_) throw BackendError(fmt::format("{}: take() after bind() (a bug in the model)", what_));
  if (slot >= bytes_.size()) throw BackendError(fmt::format("{}: slot {} does not exist", what_, slot));
  if (!buffer.defined()) return;  // not computed, or already taken by another list
  if (used_[slot] && buffer.dtype() != dtype_[slot]) {
    throw BackendError(fmt::format("{}: buffer {} of slot {} is not {}; layers sharing buffers must compute in one "
                                   "dtype",
                                   what_, buffer.describe(), slot, dtype_name(dtype_[slot])));
  }
  total_.apart += buffer.bytes();
  bytes_[slot] = std::max(bytes_[slot], buffer.bytes());
  dtype_[slot] = buffer.dtype();
  used_[slot] = true;
  taken_.push_back({slot, &buffer, buffer.shape(), buffer.dtype(), buffer.layout()});
  buffer = Tensor();  // its memory goes back now, not when bind() replaces it
}

SharedBytes SharedSlots::bind(Backend& backend, const SpareMemory& spare) {
  if (bound_) throw BackendError(fmt::format("{}: bind() called twice (a bug in the model)", what_));
  bound_ = true;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < bytes_.size(); ++i) {
    if (used_[i]) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bytes_[a] > bytes_[b]; });
  std::vector<std::shared_ptr<Storage>> storage(bytes_.size());
  std::vector<std::size_t> offset(bytes_.size(), 0);
  std::size_t spare_used = 0;
  for (std::size_t i : order) {
    total_.shared += bytes_[i];
    if (spare.arena.defined() && spare_used + bytes_[i] <= spare.bytes) {
      storage[i] = spare.arena.storage();
      offset[i] = spare.arena.offset_bytes() + spare_used;
      spare_used += round_up(bytes_[i], kBufferAlignment);
      continue;
    }
    const std::size_t size = dtype_size(dtype_[i]);
    const Tensor slot =
        backend.allocate({static_cast<std::int64_t>((bytes_[i] + size - 1) / size)}, dtype_[i], MemoryKind::device);
    storage[i] = slot.storage();
    offset[i] = slot.offset_bytes();
    allocated_ += bytes_[i];
  }
  for (const Taken& t : taken_) *t.buffer = Tensor(storage[t.slot], t.shape, t.dtype, offset[t.slot], t.layout);
  return total_;
}

StageArena::StageArena(std::string what) : what_(std::move(what)) {}

void StageArena::take(Tensor& buffer) {
  if (bound_) throw BackendError(fmt::format("{}: take() after bind() (a bug in the model)", what_));
  if (!buffer.defined()) return;  // already taken by another list
  taken_.push_back({&buffer, buffer.shape(), buffer.dtype(), buffer.layout(), bytes_});
  bytes_ += round_up(buffer.bytes(), kBufferAlignment);
  buffer = Tensor();  // its memory goes back now
}

void StageArena::bind(Backend& backend) {
  if (bound_) throw BackendError(fmt::format("{}: bind() called twice (a bug in the model)", what_));
  bound_ = true;
  if (taken_.empty()) return;
  arena_ = backend.allocate({static_cast<std::int64_t>(bytes_)}, DType::u8, MemoryKind::device);
  for (const Taken& t : taken_) {
    *t.buffer = Tensor(arena_.storage(), t.shape, t.dtype, arena_.offset_bytes() + t.offset, t.layout);
  }
}

void share_gradient_buffers(Backend& backend, const std::vector<ResidualBlock*>& blocks) {
  SharedSlots slots(kGradSlots, "share_gradient_buffers");
  for (ResidualBlock* block : blocks) slots.take_all(block->gradient_buffers());
  (void)slots.bind(backend);
}

}  // namespace kiln::resnet
