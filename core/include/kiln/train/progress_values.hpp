// The values the progress display shows after the rate: for training, the running loss and
// accuracy of this epoch so far (on this rank's share of the batches, not reduced: reducing would
// be a collective at every redraw), the learning rate, and under fp16 the loss scale and the
// steps skipped so far; for evaluation, the running loss and accuracy.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::train {

using ProgressValues = std::vector<std::pair<std::string, std::string>>;

/// `precision_metrics` is the precision policy's metrics() ("loss_scale", "skipped_steps").
ProgressValues train_progress_values(double loss_sum, double correct, double samples, double lr,
                                     const std::map<std::string, double>& precision_metrics);

ProgressValues eval_progress_values(double loss_sum, double correct, double samples);

}  // namespace kiln::train
