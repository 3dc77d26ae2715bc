// The device-side top-k count of an evaluation pass (see the header).
#include "kiln/train/top_k_counter.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::train {

std::optional<std::string> TopKCounter::not_counted(const Backend& backend, std::int64_t classes, std::int64_t k) {
  if (classes <= k) return fmt::format("the model has {} classes, and top-{} needs more than {}", classes, k, k);
  if (!backend.supports(Op::top_k_hits, DType::f32)) {
    return fmt::format("backend '{}' does not implement top_k_hits", backend.name());
  }
  return std::nullopt;
}

void check_watched_top_k(const Backend& backend, std::int64_t classes, const std::vector<const WatchedMetric*>& watched) {
  for (const WatchedMetric* m : watched) {
    if (m == nullptr || !is_top_k_metric(m->name)) continue;
    if (const auto why_not = TopKCounter::not_counted(backend, classes)) {
      throw ConfigError(fmt::format("{} = \"{}\" cannot be counted in this run: {}", m->where, m->name, *why_not));
    }
  }
}

TopKCounter::TopKCounter(Backend& backend, std::int64_t k)
    : backend_(&backend),
      k_(k),
      count_(backend.allocate({1}, DType::f32, MemoryKind::device)),
      count_host_(host_tensor({1}, DType::f32)) {
  reset();
}

void TopKCounter::reset() { backend_->fill(count_, 0.0); }

void TopKCounter::add(const Tensor& logits, const Tensor& labels, std::int64_t valid_rows) {
  if (valid_rows == 0) return;
  backend_->top_k_hits(count_, logits.rows(0, valid_rows), labels.rows(0, valid_rows), k_);
}

double TopKCounter::total() {
  backend_->copy(count_, count_host_);
  return count_host_.data_as<float>()[0];
}

}  // namespace kiln::train
