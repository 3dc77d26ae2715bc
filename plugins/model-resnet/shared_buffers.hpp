// How the resnet model lays its buffers out in device memory: SharedSlots (buffers that take
// turns in a few shared slots) and StageArena (a stage's forward outputs packed into one
// allocation, whose memory is dead while earlier stages run backward and can hold their
// gradients). Used only by this plugin; blocks.hpp and resnet_model.cpp say what goes where.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <kiln/backend.hpp>
#include <kiln/tensor.hpp>

namespace kiln::resnet {

/// What sharing saved: the buffers' bytes apart, and the slots' bytes.
struct SharedBytes {
  std::size_t apart = 0;
  std::size_t shared = 0;
};

/// Memory a SharedSlots may place its slots in instead of allocating them: `bytes` bytes of
/// `arena`'s storage from its start, which nothing reads or writes while the slots' buffers are
/// in use. Empty (undefined arena) when there is none.
struct SpareMemory {
  Tensor arena;
  std::size_t bytes = 0;
};

/// Buffers that end up as views of a few shared slots (GradSlot, ForwardSlot), collected while a
/// model is built: take() records a layer's buffer (shape, dtype, layout, slot) and gives its
/// memory back at once; bind() then gives each slot one piece of memory, for the largest byte
/// size taken into it, and makes every taken buffer a view of it. A model takes each block's
/// buffers right after building that block, so it never holds more than one block's own buffers
/// on top of what it keeps. That matters on a GPU, where an allocated buffer counts whether or
/// not it is ever touched: holding all of them until the end made ResNet-50's build peak at twice
/// its steady state (28,820 against 13,743 MiB in bf16 at batch 256 on an H200), the run's peak.
class SharedSlots {
 public:
  /// `slot_count` slots (kGradSlots, kForwardSlots); `what` names them in errors.
  SharedSlots(std::size_t slot_count, std::string what);
  /// Records `buffer` for `slot` and releases it. An undefined buffer (a gradient the layer does
  /// not compute, or one another list took first) is skipped. Every buffer of a slot must have
  /// one dtype.
  void take(std::size_t slot, Tensor& buffer);
  template <class Buffer>
  void take_all(const std::vector<Buffer>& buffers) {
    for (const Buffer& b : buffers) take(static_cast<std::size_t>(b.slot), *b.buffer);
  }
  /// Places the used slots, largest first, in `spare` while they fit (at 256-byte boundaries)
  /// and allocates the others; makes every taken buffer a view of its slot. Once.
  SharedBytes bind(Backend& backend, const SpareMemory& spare = {});
  /// Bytes of the slots that bind() allocated rather than placed in spare memory.
  std::size_t allocated_bytes() const noexcept { return allocated_; }

 private:
  struct Taken {
    std::size_t slot;
    Tensor* buffer;
    Shape shape;
    DType dtype;
    Layout layout;
  };
  std::string what_;
  std::vector<std::size_t> bytes_;  // per slot: the largest buffer taken into it
  std::vector<DType> dtype_;
  std::vector<bool> used_;
  std::vector<Taken> taken_;
  SharedBytes total_;
  std::size_t allocated_ = 0;
  bool bound_ = false;
};

/// One stage's forward outputs (what its blocks keep for backward) packed into one allocation:
/// take() records a buffer and releases it, bind() allocates the sum (each buffer at a 256-byte
/// boundary) and makes every taken buffer a view at its own offset, so none overlaps another.
/// Once the stage's backward has run, that memory is dead until the next forward: the stages
/// before it run backward afterwards, so their activation gradients can live in it (SpareMemory).
class StageArena {
 public:
  explicit StageArena(std::string what);
  /// Records `buffer` and releases it; an undefined one (taken first by another list) is skipped.
  void take(Tensor& buffer);
  template <class Buffer>
  void take_all(const std::vector<Buffer>& buffers) {
    for (const Buffer& b : buffers) take(*b.buffer);
  }
  /// Allocates the arena and binds the taken buffers. Once.
  void bind(Backend& backend);
  /// The whole arena as spare memory for another stage's slots (valid after bind()).
  SpareMemory spare() const { return {arena_, bytes_}; }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  struct Taken {
    Tensor* buffer;
    Shape shape;
    DType dtype;
    Layout layout;
    std::size_t offset;
  };
  std::string what_;
  std::vector<Taken> taken_;
  std::size_t bytes_ = 0;
  Tensor arena_;
  bool bound_ = false;
};

}  // namespace kiln::resnet
