// Step records ([log] every_steps = N): every N optimizer steps, one metrics.jsonl record with
// "split": "train_step" (and its TensorBoard scalars) describing the steps since the previous
// one: loss and accuracy reduced over all ranks, throughput, time per step, time waited for data
// and for gradient communication. docs/metrics.md lists the fields.
//
// The window restarts at each epoch (the trainer's running sums do), so the first record of an
// epoch covers the steps from the epoch's start; "steps" says how many. Every rank calls
// record() at the same steps (the condition is the global step, the same everywhere), since the
// loss is reduced over ranks there; only rank 0 has a writer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/io/metrics_writer.hpp"

namespace kiln::train {

/// What the trainer has counted since the current epoch began.
struct EpochSoFar {
  double loss_sum = 0, correct = 0, samples = 0;  ///< this rank's (the loss's running sums)
  double global_samples = 0;                      ///< over all ranks
  double data_wait_s = 0, comm_wait_s = 0;        ///< this rank's
  std::int64_t steps = 0;
};

class StepMetrics {
 public:
  /// Sums each value over all ranks (a collective).
  using Reduce = std::function<std::vector<double>(const std::vector<double>&)>;
  /// `every_steps` 0 turns step records off; `writer` is null on ranks other than 0; `clock`
  /// gives monotonic seconds (default steady_clock; tests inject one).
  StepMetrics(std::int64_t every_steps, io::MetricsWriter* writer, Reduce reduce,
              std::function<double()> clock = {});

  /// The window restarts: counts from zero, time from now.
  void start_epoch();
  /// Whether a record is due after optimizer step number `global_step` (counted from 1).
  bool due(std::int64_t global_step) const noexcept {
    return every_ > 0 && global_step > 0 && global_step % every_ == 0;
  }
  /// Writes the record for the window ending at `global_step` (`epoch` counted from 1), then
  /// starts the next window. `extra` fields (the precision policy's loss scale) are appended.
  void record(std::int64_t epoch, std::int64_t global_step, double lr, const EpochSoFar& so_far,
              const std::map<std::string, double>& extra);

 private:
  std::int64_t every_;
  io::MetricsWriter* writer_;
  Reduce reduce_;
  std::function<double()> clock_;
  EpochSoFar last_;  // the counts at the window's start
  double window_start_ = 0;
};

}  // namespace kiln::train
