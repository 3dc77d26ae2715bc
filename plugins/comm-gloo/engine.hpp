// Engine: what the communication thread runs, one Gloo call per collective.
//
// Algorithms: `ring` uses Gloo's functional allreduce (reduce-scatter + all-gather in segments,
// so every rank ends with bit-identical sums; Gloo's older AllreduceRing class reduces in a
// different order on each rank and is not used). `ring_chunked`, `halving_doubling` and `bcube`
// use Gloo's algorithm classes, which bind buffers and slots at construction: instances are
// cached per (algorithm, op, dtype, count) with their own staging buffer (copy in, run, copy
// out) so that cache hits depend only on what every rank calls identically, never on pointers
// that differ between ranks. The cache is LRU, bounded, and evicts identically on every rank.
// Only the communication thread touches an Engine after connect().
#pragma once

#include <gloo/rendezvous/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/tensor.hpp"

namespace kiln::gloo_comm {

enum class Algorithm : std::uint8_t { ring, ring_chunked, halving_doubling, bcube };

std::string_view algorithm_name(Algorithm algorithm) noexcept;

class Engine {
 public:
  Engine(std::shared_ptr<::gloo::rendezvous::Context> context, Algorithm algorithm,
         std::chrono::milliseconds timeout);
  ~Engine();

  /// In place over `count` elements of f32, f64, f16 or bf16 at `data`.
  void all_reduce(void* data, DType dtype, std::size_t count, ReduceOp op, std::uint32_t tag);
  void broadcast(void* data, std::size_t bytes, int root, std::uint32_t tag);
  void all_gather(void* out, const void* in, std::size_t bytes, std::uint32_t tag);
  void barrier(std::uint32_t tag);

  /// Closes every connection so that a blocked collective fails now (abort path).
  void close_connections() noexcept;
  int rank() const noexcept { return context_->rank; }
  int size() const noexcept { return context_->size; }

 private:
  struct CachedAlgorithm;

  template <class T>
  void reduce(T* data, std::size_t count, ReduceOp op, std::uint32_t tag);
  template <class T>
  void reduce_functional(T* data, std::size_t count, ReduceOp op, std::uint32_t tag);
  template <class T>
  CachedAlgorithm& cached(ReduceOp op, DType dtype, std::size_t count);

  std::shared_ptr<::gloo::rendezvous::Context> context_;
  Algorithm algorithm_;
  std::chrono::milliseconds timeout_;
  std::list<std::unique_ptr<CachedAlgorithm>> cache_;  // most recently used first
  std::vector<float> scratch_;                          // bf16 -> f32 staging
};

}  // namespace kiln::gloo_comm
