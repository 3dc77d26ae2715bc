// SharedSlots and StageArena (plugins/model-resnet/shared_buffers.hpp) on their own: where each
// taken buffer ends up. A stage's forward outputs are packed without overlap; gradient slots
// placed in another stage's arena stay inside it, do not overlap each other, and are allocated
// only when the arena has no room left; every buffer of one slot is a view of the same bytes.
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../support/live_bytes_backend.hpp"
#include "kiln/errors.hpp"
#include "nn_fixture.hpp"
#include "shared_buffers.hpp"

namespace {

using kiln::DType;
using kiln::Tensor;
using kiln::test::cpu;

/// [first byte, one past the last) of `t` in its storage's address space.
std::pair<std::uintptr_t, std::uintptr_t> span_of(const Tensor& t) {
  const auto base = reinterpret_cast<std::uintptr_t>(t.storage()->data()) + t.offset_bytes();
  return {base, base + t.bytes()};
}

bool overlap(const Tensor& a, const Tensor& b) {
  const auto [a0, a1] = span_of(a);
  const auto [b0, b1] = span_of(b);
  return a0 < b1 && b0 < a1;
}

bool inside(const Tensor& t, const Tensor& arena) {
  const auto [t0, t1] = span_of(t);
  const auto [a0, a1] = span_of(arena);
  return t.storage() == arena.storage() && a0 <= t0 && t1 <= a1;
}

Tensor device(kiln::Backend& backend, std::int64_t n) { return backend.allocate({n}, DType::f32, kiln::MemoryKind::device); }

}  // namespace

BOOST_AUTO_TEST_SUITE(shared_buffers_layout)

BOOST_AUTO_TEST_CASE(an_arena_packs_its_buffers_apart_at_256_byte_offsets) {
  kiln::test::LiveBytesBackend backend(cpu());
  std::vector<Tensor> buffers = {device(backend, 100), device(backend, 7), device(backend, 1000)};
  const kiln::Shape shape0 = buffers[0].shape();
  kiln::resnet::StageArena arena("test arena");
  for (Tensor& t : buffers) arena.take(t);
  BOOST_TEST(backend.live() == 0u);  // taken buffers are released at once
  arena.bind(backend);
  BOOST_TEST(backend.live() == arena.bytes());
  BOOST_TEST(arena.bytes() == 512u + 256u + 4096u);  // each at a 256-byte boundary
  BOOST_TEST((buffers[0].shape() == shape0));
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    BOOST_TEST(inside(buffers[i], arena.spare().arena));
    // 256-byte offsets from the arena's start (whose own alignment is the backend's allocator's).
    const auto offset = reinterpret_cast<std::uintptr_t>(buffers[i].data()) -
                        reinterpret_cast<std::uintptr_t>(arena.spare().arena.data());
    BOOST_TEST(offset % 256 == 0u);
    for (std::size_t j = i + 1; j < buffers.size(); ++j) BOOST_TEST(!overlap(buffers[i], buffers[j]));
  }
}

BOOST_AUTO_TEST_CASE(slots_go_into_spare_memory_largest_first_and_the_rest_is_allocated) {
  kiln::test::LiveBytesBackend backend(cpu());
  std::vector<Tensor> activations = {device(backend, 1024)};  // a 4 KiB arena
  kiln::resnet::StageArena arena("test arena");
  arena.take(activations[0]);
  arena.bind(backend);
  const std::size_t arena_bytes = backend.live();

  // Slot 0: 3 KiB (two buffers share it), slot 1: 2 KiB, slot 2: 512 bytes. Largest first: slot
  // 0 fits the arena, slot 1 does not fit what is left and is allocated, slot 2 fits.
  std::vector<Tensor> grads = {device(backend, 768), device(backend, 256), device(backend, 512), device(backend, 128)};
  kiln::resnet::SharedSlots slots(3, "test slots");
  slots.take(0, grads[0]);
  slots.take(0, grads[1]);
  slots.take(1, grads[2]);
  slots.take(2, grads[3]);
  BOOST_TEST(backend.live() == arena_bytes);
  const kiln::resnet::SharedBytes bytes = slots.bind(backend, arena.spare());
  BOOST_TEST(bytes.apart == (768u + 256u + 512u + 128u) * 4u);
  BOOST_TEST(bytes.shared == (768u + 512u + 128u) * 4u);
  BOOST_TEST(slots.allocated_bytes() == 512u * 4u);
  BOOST_TEST(backend.live() == arena_bytes + 512u * 4u);
  const Tensor& whole = arena.spare().arena;
  BOOST_TEST(inside(grads[0], whole));
  BOOST_TEST(grads[1].data() == grads[0].data());  // one slot, one piece of memory
  BOOST_TEST(!inside(grads[2], whole));
  BOOST_TEST(inside(grads[3], whole));
  BOOST_TEST(!overlap(grads[0], grads[3]));
}

// A buffer listed twice (the downsample batch norm's output is in a block's gradient list and in
// its forward list) belongs to whoever takes it first: taken, it is undefined, and is skipped.
BOOST_AUTO_TEST_CASE(a_buffer_goes_where_it_is_taken_first_and_nothing_is_taken_after_bind) {
  kiln::test::LiveBytesBackend backend(cpu());
  Tensor shared = device(backend, 16);
  kiln::resnet::SharedSlots slots(2, "test slots");
  kiln::resnet::StageArena arena("test arena");
  Tensor stray = device(backend, 16);
  BOOST_CHECK_THROW(slots.take(2, stray), kiln::BackendError);  // no such slot
  slots.take(1, shared);
  arena.take(shared);
  arena.bind(backend);
  BOOST_TEST(arena.bytes() == 0u);
  BOOST_TEST(!arena.spare().arena.defined());
  slots.bind(backend);
  BOOST_TEST(shared.defined());
  BOOST_TEST(slots.allocated_bytes() == 64u);
  Tensor late = device(backend, 16);
  BOOST_CHECK_THROW(slots.take(0, late), kiln::BackendError);
  BOOST_CHECK_THROW(arena.take(late), kiln::BackendError);
}

BOOST_AUTO_TEST_SUITE_END()
