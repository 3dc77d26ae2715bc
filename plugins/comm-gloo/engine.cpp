// Engine: Gloo calls for each collective (see engine.hpp).
#include "engine.hpp"

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/types.h>

#include <fmt/format.h>

#include <climits>
#include <cstddef>
#include <cstring>

#include "average.hpp"
#include "kiln/sdk/half.hpp"
#include "kiln/errors.hpp"

namespace kiln::gloo_comm {
namespace {

// Class-algorithm instances kept alive at once. Each holds count x element bytes of staging
// plus Gloo's own inboxes; GradSync uses a handful of bucket sizes, so this is never reached in
// training, and a benchmark sweep evicts the oldest sizes.
constexpr std::size_t kMaxCachedAlgorithms = 16;

template <class T>
const ::gloo::ReductionFunction<T>* reduction_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::max: return ::gloo::ReductionFunction<T>::max;
    case ReduceOp::min: return ::gloo::ReductionFunction<T>::min;
    default: return ::gloo::ReductionFunction<T>::sum;  // avg = sum, then divide
  }
}

template <class T>
::gloo::AllreduceOptions::Func functional_reduction_of(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, std::size_t);
  switch (op) {
    case ReduceOp::max: return static_cast<Fn>(&::gloo::max<T>);
    case ReduceOp::min: return static_cast<Fn>(&::gloo::min<T>);
    default: return static_cast<Fn>(&::gloo::sum<T>);
  }
}

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) noexcept {
  switch (algorithm) {
    case Algorithm::ring: return "ring";
    case Algorithm::ring_chunked: return "ring_chunked";
    case Algorithm::halving_doubling: return "halving_doubling";
    case Algorithm::bcube: return "bcube";
  }
  return "?";
}

struct Engine::CachedAlgorithm {
  ReduceOp op;
  DType dtype;
  std::size_t count;
  std::vector<std::max_align_t> staging;  // max_align_t: aligned for every element type
  void* data() { return staging.data(); }
  std::unique_ptr<::gloo::Algorithm> algorithm;
};

Engine::Engine(std::shared_ptr<::gloo::rendezvous::Context> context, Algorithm algorithm,
               std::chrono::milliseconds timeout)
    : context_(std::move(context)), algorithm_(algorithm), timeout_(timeout) {}

Engine::~Engine() = default;

template <class T>
Engine::CachedAlgorithm& Engine::cached(ReduceOp op, DType dtype, std::size_t count) {
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if ((*it)->op == op && (*it)->dtype == dtype && (*it)->count == count) {
      cache_.splice(cache_.begin(), cache_, it);
      return *cache_.front();
    }
  }
  if (count * sizeof(T) > static_cast<std::size_t>(INT_MAX)) {
    throw CommError(fmt::format(
        "gloo {} handles at most {} bytes per all_reduce (Gloo's algorithm classes count bytes "
        "in an int), got {} elements of {} bytes; use comm.algorithm = \"ring\" or smaller buckets",
        algorithm_name(algorithm_), INT_MAX, count, sizeof(T)));
  }
  auto entry = std::make_unique<CachedAlgorithm>();
  entry->op = op;
  entry->dtype = dtype;
  entry->count = count;
  entry->staging.resize((count * sizeof(T) + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
  std::vector<T*> ptrs{static_cast<T*>(entry->data())};
  const int n = static_cast<int>(count);
  const auto* fn = reduction_of<T>(op);
  switch (algorithm_) {
    case Algorithm::ring_chunked:
      entry->algorithm = std::make_unique<::gloo::AllreduceRingChunked<T>>(context_, ptrs, n, fn);
      break;
    case Algorithm::halving_doubling:
      entry->algorithm = std::make_unique<::gloo::AllreduceHalvingDoubling<T>>(context_, ptrs, n, fn);
      break;
    case Algorithm::bcube:
      entry->algorithm = std::make_unique<::gloo::AllreduceBcube<T>>(context_, ptrs, n, fn);
      break;
    case Algorithm::ring:
      throw CommError("internal error: the ring algorithm has no cached instance");
  }
  cache_.push_front(std::move(entry));
  if (cache_.size() > kMaxCachedAlgorithms) cache_.pop_back();
  return *cache_.front();
}

template <class T>
void Engine::reduce_functional(T* data, std::size_t count, ReduceOp op, std::uint32_t tag) {
  ::gloo::AllreduceOptions opts(context_);
  opts.setAlgorithm(::gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(data, count);
  opts.setReduceFunction(functional_reduction_of<T>(op));
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  ::gloo::allreduce(opts);
}

template <class T>
void Engine::reduce(T* data, std::size_t count, ReduceOp op, std::uint32_t tag) {
  if (algorithm_ == Algorithm::ring) {
    reduce_functional(data, count, op, tag);
    return;
  }
  DType dtype = DType::f32;
  if constexpr (std::is_same_v<T, double>) dtype = DType::f64;
  if constexpr (std::is_same_v<T, ::gloo::float16>) dtype = DType::f16;
  auto& entry = cached<T>(op == ReduceOp::avg ? ReduceOp::sum : op, dtype, count);
  std::memcpy(entry.data(), data, count * sizeof(T));
  entry.algorithm->run();
  std::memcpy(static_cast<void*>(data), entry.data(), count * sizeof(T));
}

void Engine::all_reduce(void* data, DType dtype, std::size_t count, ReduceOp op, std::uint32_t tag) {
  if (count == 0) return;
  const ReduceOp base = op == ReduceOp::avg ? ReduceOp::sum : op;
  const int world = context_->size;
  switch (dtype) {
    case DType::f32: {
      auto* p = static_cast<float*>(data);
      if (world > 1) reduce(p, count, base, tag);
      if (op == ReduceOp::avg) divide(p, count, world);
      return;
    }
    case DType::f64: {
      auto* p = static_cast<double*>(data);
      if (world > 1) reduce(p, count, base, tag);
      if (op == ReduceOp::avg) divide(p, count, world);
      return;
    }
    case DType::f16: {
      if (world > 1) reduce(static_cast<::gloo::float16*>(data), count, base, tag);
      if (op == ReduceOp::avg) divide_f16(static_cast<std::uint16_t*>(data), count, world);
      return;
    }
    case DType::bf16: {
      auto* p = static_cast<std::uint16_t*>(data);
      if (world == 1) return;  // sum, avg, max and min over one rank are the identity
      scratch_.resize(count);
      sdk::bf16_to_f32(p, scratch_.data(), count);
      reduce(scratch_.data(), count, base, tag);
      if (op == ReduceOp::avg) divide(scratch_.data(), count, world);
      sdk::f32_to_bf16(scratch_.data(), p, count);
      return;
    }
    default:
      throw CommError(fmt::format("gloo all_reduce supports f32, f64, f16 and bf16, not {}",
                                  dtype_name(dtype)));
  }
}

void Engine::broadcast(void* data, std::size_t bytes, int root, std::uint32_t tag) {
  if (bytes == 0 || context_->size == 1) return;
  ::gloo::BroadcastOptions opts(context_);
  opts.setOutput(static_cast<std::uint8_t*>(data), bytes);
  opts.setRoot(root);
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  ::gloo::broadcast(opts);
}

void Engine::all_gather(void* out, const void* in, std::size_t bytes, std::uint32_t tag) {
  if (bytes == 0) return;
  if (context_->size == 1) {
    if (out != in) std::memmove(out, in, bytes);
    return;
  }
  ::gloo::AllgatherOptions opts(context_);
  opts.setInput(const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(in)), bytes);
  opts.setOutput(static_cast<std::uint8_t*>(out), bytes * static_cast<std::size_t>(context_->size));
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  ::gloo::allgather(opts);
}

void Engine::barrier(std::uint32_t tag) {
  if (context_->size == 1) return;
  ::gloo::BarrierOptions opts(context_);
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  ::gloo::barrier(opts);
}

void Engine::close_connections() noexcept {
  try {
    context_->closeConnections();
  } catch (...) {
    // Already failing; the blocked collective times out on its own.
  }
}

}  // namespace kiln::gloo_comm
