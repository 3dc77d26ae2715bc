// metrics.jsonl field -> TensorBoard tag (see the header).
#include "kiln/io/metric_tags.hpp"

#include <array>

namespace kiln::io {
namespace {

// Written by the trainer (trainer.cpp, train/step_metrics.cpp); docs/metrics.md describes each.
constexpr std::array<std::string_view, 10> kPerfKeys = {
    "samples_per_s",  "time_s",       "step_time_ms", "data_wait_s", "data_wait_ms", "data_wait_ms_per_step",
    "data_capacity_samples_per_s", "comm_wait_s", "comm_wait_ms", "exposed_comm_ms_per_step",
};

}  // namespace

bool is_perf_counter(std::string_view key) {
  if (key.starts_with("device_")) return true;
  for (std::string_view k : kPerfKeys) {
    if (k == key) return true;
  }
  return false;
}

std::optional<std::string> tensorboard_tag(std::string_view split, std::string_view key) {
  if (key == "epoch" || key == "step" || key == "wall_time") return std::nullopt;
  std::string tag = is_perf_counter(key) ? "perf/" : "";
  tag.append(split).append("/").append(key);
  return tag;
}

}  // namespace kiln::io
