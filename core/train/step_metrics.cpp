// Step records (see the header).
#include "kiln/train/step_metrics.hpp"

#include <chrono>

namespace kiln::train {

StepMetrics::StepMetrics(std::int64_t every_steps, io::MetricsWriter* writer, Reduce reduce,
                         std::function<double()> clock)
    : every_(every_steps), writer_(writer), reduce_(std::move(reduce)), clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  }
  window_start_ = clock_();
}

void StepMetrics::start_epoch() {
  last_ = EpochSoFar{};
  window_start_ = clock_();
}

void StepMetrics::record(std::int64_t epoch, std::int64_t global_step, double lr, const EpochSoFar& now,
                         const std::map<std::string, double>& extra) {
  const double t = clock_();
  const double seconds = t - window_start_;
  const std::vector<double> sums =
      reduce_({now.loss_sum - last_.loss_sum, now.correct - last_.correct, now.samples - last_.samples});
  const double samples = sums[2];
  const double global_samples = now.global_samples - last_.global_samples;
  const std::int64_t steps = now.steps - last_.steps;
  const double per_step_ms = steps > 0 ? 1e3 / static_cast<double>(steps) : 0.0;
  if (writer_) {
    io::MetricsRecord rec;
    rec.add("epoch", epoch).add("step", global_step).add("split", std::string("train_step"));
    // A window without samples (an empty last batch under "partial") has no loss to report.
    if (samples > 0) rec.add("loss", sums[0] / samples).add("accuracy", sums[1] / samples);
    rec.add("samples", static_cast<std::int64_t>(global_samples))
        .add("steps", steps)
        .add("lr", lr)
        .add("samples_per_s", seconds > 0 ? global_samples / seconds : 0.0)
        .add("step_time_ms", seconds * per_step_ms)
        .add("data_wait_ms", (now.data_wait_s - last_.data_wait_s) * per_step_ms)
        .add("comm_wait_ms", (now.comm_wait_s - last_.comm_wait_s) * per_step_ms);
    for (const auto& [k, v] : extra) rec.add(k, v);
    writer_->write(rec);
  }
  last_ = now;
  window_start_ = t;
}

}  // namespace kiln::train
