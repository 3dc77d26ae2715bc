// The top-k accuracy of an evaluation pass (ImageNet's Acc@5), counted where the logits are.
//
// Like the loss's [loss sum, correct count], the count stays in the backend's memory and is read
// once at the end of the pass: reading each batch's logits back to the host would make a GPU's
// eval loop wait for the device every batch. Each batch adds its hits with Backend::top_k_hits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/train/early_stop.hpp"

namespace kiln::train {

/// The k of the top-k accuracy reported besides top-1 (ImageNet's Acc@5): in each epoch's test
/// record and by `kiln eval`, for a model of more than kTopK classes.
inline constexpr std::int64_t kTopK = 5;

/// Throws ConfigError naming the key when one of `watched` (early stopping's metric, keep_best)
/// is eval_accuracy_top5 and a run of `classes` classes on `backend` cannot count it.
void check_watched_top_k(const Backend& backend, std::int64_t classes, const std::vector<const WatchedMetric*>& watched);

class TopKCounter {
 public:
  /// Why a run of `classes` classes on `backend` has no top-k accuracy, or nullopt when it has
  /// one: k or fewer classes (every label would be a hit), or a backend without top_k_hits.
  static std::optional<std::string> not_counted(const Backend& backend, std::int64_t classes,
                                                std::int64_t k = kTopK);

  /// A zeroed counter; the caller has checked not_counted() is nullopt.
  TopKCounter(Backend& backend, std::int64_t k = kTopK);

  void reset();
  /// Adds the hits of the first valid_rows rows of logits (rows, classes) f32 and labels i32.
  void add(const Tensor& logits, const Tensor& labels, std::int64_t valid_rows);
  /// The hits since reset() (synchronizes the backend).
  double total();

 private:
  Backend* backend_;
  std::int64_t k_;
  Tensor count_, count_host_;
};

}  // namespace kiln::train
