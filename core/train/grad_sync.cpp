// Bucketed, overlapped gradient all-reduce (see the header).
#include "kiln/train/grad_sync.hpp"
#include "kiln/train/collective_purpose.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"

namespace kiln::train {

GradSync::GradSync(Communicator& comm, std::span<const Parameter> params, std::int64_t bucket_bytes,
                   const std::set<std::string>& frozen)
    : comm_(comm), params_(params), bucket_of_(params.size(), kNoBucket), reported_(params.size(), 0) {
  if (params.empty()) return;
  const auto& storage = params.front().grad.storage();
  for (const auto& p : params) {
    if (p.grad.storage() != storage) {
      throw BackendError("GradSync needs every gradient in one arena; parameter '" + p.name + "' is not");
    }
  }
  auto is_frozen = [&](std::size_t i) { return frozen.count(params[i].name) > 0; };
  // Walk from the last parameter to the first, closing a bucket once it holds bucket_bytes or
  // when the next parameter down is frozen (a bucket is one contiguous slice).
  std::size_t end = params.size();  // one past the bucket's highest parameter index
  while (end > 0) {
    if (is_frozen(end - 1)) {
      --end;
      continue;
    }
    std::size_t begin = end - 1;
    std::size_t bytes = params[begin].grad.bytes();
    while (begin > 0 && !is_frozen(begin - 1) && static_cast<std::int64_t>(bytes) < bucket_bytes) {
      --begin;
      bytes += params[begin].grad.bytes();
    }
    const Tensor& lo = params[begin].grad;
    const Tensor& hi = params[end - 1].grad;
    const std::size_t esize = dtype_size(lo.dtype());
    const std::int64_t elems = static_cast<std::int64_t>((hi.offset_bytes() + hi.bytes() - lo.offset_bytes()) / esize);
    Bucket b;
    b.slice = Tensor(storage, {elems}, lo.dtype(), lo.offset_bytes());
    b.total = end - begin;
    for (std::size_t i = begin; i < end; ++i) bucket_of_[i] = buckets_.size();
    buckets_.push_back(std::move(b));
    end = begin;
  }
}

void GradSync::begin_step() {
  std::fill(reported_.begin(), reported_.end(), 0);
  for (auto& b : buckets_) {
    b.pending = b.total;
    b.work.reset();
  }
}

GradReadyFn GradSync::ready_callback() {
  return [this](std::size_t i) { mark_ready(i); };
}

void GradSync::mark_ready(std::size_t i) {
  // A model reporting twice is harmless; a frozen parameter's report is not waited for.
  if (i >= reported_.size() || reported_[i] || bucket_of_[i] == kNoBucket) return;
  reported_[i] = 1;
  Bucket& b = buckets_[bucket_of_[i]];
  if (--b.pending == 0) launch(b);
}

void GradSync::launch(Bucket& b) {
  const CollectivePurpose purpose("gradients, bucket", &b - buckets_.data());
  b.work = comm_.all_reduce(b.slice, ReduceOp::sum);
}

void GradSync::finish() {
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < reported_.size(); ++i) {
    if (!reported_[i] && bucket_of_[i] != kNoBucket) missing.push_back(params_[i].name);
  }
  if (!missing.empty() && !warned_) {
    warned_ = true;
    log::get("train")->warn("backward produced no gradient for {} (kept at zero and reduced anyway)",
                            fmt::join(missing, ", "));
  }
  for (auto& b : buckets_) {
    if (!b.work) launch(b);
  }
  for (auto& b : buckets_) {
    b.work->wait();
    b.work.reset();
  }
}

Tensor GradSync::carrier() const { return buckets_.empty() ? Tensor() : buckets_.front().slice.view(0, {1}); }

std::string GradSync::describe() const {
  std::size_t bytes = 0;
  for (const auto& b : buckets_) bytes += b.slice.bytes();
  return fmt::format("{} bucket(s), {:.2f} MB of gradients", buckets_.size(), static_cast<double>(bytes) / 1e6);
}

}  // namespace kiln::train
