// `kiln train --profile` wiring (run.cpp calls these three, so the run's own code stays as it was):
// wrap the backend, measure the peaks, and report the table once training has ended.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "kiln/backend.hpp"
#include "kiln/profile/profiling_backend.hpp"
#include "kiln/train/trainer.hpp"

namespace kiln::profile {

/// Replaces `backend` by a ProfilingBackend around it and points the trainer's step hooks at it.
std::shared_ptr<ProfilingBackend> attach(std::shared_ptr<Backend>& backend, train::TrainerOptions& options,
                                         std::int64_t warmup_steps);

/// Prints the table on stdout and writes `run_dir`/profile.txt and profile.json.
void report(const ProfilingBackend& profiler, const DeviceInfo& device, const std::filesystem::path& run_dir);

}  // namespace kiln::profile
