// kiln/profile/train_profile.hpp.
#include "kiln/profile/train_profile.hpp"

#include <iostream>
#include <string>

#include <fmt/format.h>

#include "kiln/io/atomic_file.hpp"

namespace kiln::profile {

std::shared_ptr<ProfilingBackend> attach(std::shared_ptr<Backend>& backend, train::TrainerOptions& options,
                                         std::int64_t warmup_steps) {
  auto profiler = std::make_shared<ProfilingBackend>(backend, warmup_steps);
  backend = profiler;
  // The hooks hold a plain pointer: the trainer (and its options) never outlive the backend.
  ProfilingBackend* p = profiler.get();
  options.on_step_begin = [p] { p->step_begin(); };
  options.on_step_end = [p] { p->step_end(); };
  return profiler;
}

void report(const ProfilingBackend& profiler, const DeviceInfo& device, const std::filesystem::path& run_dir) {
  // The device line names the CPU model and the ISA the backend dispatches to (its detail), so a
  // table pasted elsewhere says where it was measured.
  const std::string where = device.detail.empty() ? device.name : fmt::format("{}; {}", device.name, device.detail);
  const std::string table = format_table(profiler.profile(), where);
  std::cout << table << std::flush;
  io::write_file_atomic(run_dir / "profile.txt", table);
  io::write_file_atomic(run_dir / "profile.json", to_json(profiler.profile(), where));
}

}  // namespace kiln::profile
