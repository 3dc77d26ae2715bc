// BlockPool: best-fit reuse, splitting, merging and the empty-the-cache-and-retry path
// (policy in block_pool.hpp and bin_policy.hpp).
#include "memory/block_pool.hpp"

#include <algorithm>
#include <tuple>

namespace kiln::cuda {

bool BlockPool::ByStreamSizeAddress::operator()(const Block* a, const Block* b) const noexcept {
  return std::tuple(a->stream, a->size, reinterpret_cast<std::uintptr_t>(a->ptr)) <
         std::tuple(b->stream, b->size, reinterpret_cast<std::uintptr_t>(b->ptr));
}

BlockPool::BlockPool(RawMemory& raw, std::size_t reserve_limit) : raw_(raw), reserve_limit_(reserve_limit) {}

BlockPool::~BlockPool() {
  release_cached();
  // Blocks still handed out belong to segments that can only be given back whole; at this point
  // their owners are gone (the allocator outlives every tensor), so give back what remains.
  std::set<Block*> segments_heads;
  for (auto& [ptr, block] : active_) {
    Block* head = block;
    while (head->prev != nullptr) head = head->prev;
    segments_heads.insert(head);
  }
  for (Block* head : segments_heads) {
    std::size_t bytes = 0;
    for (Block* b = head; b != nullptr; b = b->next) bytes += b->size;
    raw_.release(head->ptr, bytes);
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      if (!b->in_use) free_set(b->size_class).erase(b);
      delete b;
      b = next;
    }
  }
}

BlockPool::Block* BlockPool::find_cached(std::size_t rounded, StreamKey stream) {
  FreeSet& set = free_set(size_class(rounded));
  Block key;
  key.stream = stream;
  key.size = rounded;
  key.ptr = nullptr;
  auto it = set.lower_bound(&key);
  if (it == set.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  set.erase(it);
  return block;
}

BlockPool::Block* BlockPool::new_segment(std::size_t rounded, StreamKey stream, std::size_t asked,
                                         const AllocationLabel& what) {
  const std::size_t bytes = segment_bytes(rounded);
  if (reserve_limit_ > 0 && stats_.reserved + bytes > reserve_limit_) release_cached();
  void* ptr = raw_.allocate(bytes);
  if (ptr == nullptr) {
    ++stats_.oom_retries;
    release_cached();
    ptr = raw_.allocate(bytes);
    if (ptr == nullptr) raw_.out_of_memory(what, asked);
  }
  ++stats_.raw_allocs;
  stats_.reserved += bytes;
  auto* block = new Block;
  block->ptr = static_cast<char*>(ptr);
  block->size = bytes;
  block->stream = stream;
  block->size_class = size_class(rounded);
  return block;
}

void BlockPool::split(Block* block, std::size_t rounded) {
  auto* rest = new Block;
  rest->ptr = block->ptr + rounded;
  rest->size = block->size - rounded;
  rest->stream = block->stream;
  rest->size_class = block->size_class;
  rest->prev = block;
  rest->next = block->next;
  if (block->next != nullptr) block->next->prev = rest;
  block->next = rest;
  block->size = rounded;
  free_set(rest->size_class).insert(rest);
}

void* BlockPool::allocate(std::size_t bytes, StreamKey stream, const AllocationLabel& what) {
  ++stats_.requests;
  const std::size_t rounded = round_request(bytes);
  Block* block = find_cached(rounded, stream);
  if (block == nullptr) block = new_segment(rounded, stream, bytes, what);
  if (should_split(block->size, rounded)) split(block, rounded);
  block->in_use = true;
  active_.emplace(block->ptr, block);
  stats_.allocated += block->size;
  note_peaks();
  return block->ptr;
}

bool BlockPool::free(void* ptr) noexcept {
  auto it = active_.find(ptr);
  if (it == active_.end()) return false;
  Block* block = it->second;
  active_.erase(it);
  block->in_use = false;
  stats_.allocated -= block->size;
  FreeSet& set = free_set(block->size_class);
  // Merge with free neighbours of the same segment (same stream and class by construction).
  if (Block* next = block->next; next != nullptr && !next->in_use) {
    set.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  if (Block* prev = block->prev; prev != nullptr && !prev->in_use) {
    set.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  set.insert(block);
  return true;
}

std::size_t BlockPool::release_cached() noexcept {
  std::size_t released = 0;
  for (FreeSet& set : free_) {
    for (auto it = set.begin(); it != set.end();) {
      Block* block = *it;
      if (block->prev == nullptr && block->next == nullptr) {  // a wholly free segment
        raw_.release(block->ptr, block->size);
        ++stats_.raw_frees;
        stats_.reserved -= block->size;
        released += block->size;
        delete block;
        it = set.erase(it);
      } else {
        ++it;
      }
    }
  }
  return released;
}

void BlockPool::note_peaks() noexcept {
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
}

}  // namespace kiln::cuda
