// Which TensorBoard tag a metrics.jsonl field becomes (docs/metrics.md lists every field).
//
// Model quality and optimisation state keep "<split>/<key>" (train/loss, test/accuracy,
// train/lr, train_step/loss); performance counters -- throughput, durations, time waited for
// data or communication, the backend's device_* readings -- go to their own group,
// "perf/<split>/<key>" (perf/train/samples_per_s, perf/train_step/step_time_ms), so TensorBoard
// shows them apart from loss and accuracy. "epoch", "step" and "wall_time" are the event's
// position and time, never scalars.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::io {

/// True for the performance counters (the keys of docs/metrics.md's perf rows, and device_*).
bool is_perf_counter(std::string_view key);

/// The tag for field `key` of a record of `split`; none for the fields that are not scalars.
std::optional<std::string> tensorboard_tag(std::string_view split, std::string_view key);

}  // namespace kiln::io
