// Run directory creation that never clobbers an earlier run.
#include "kiln/io/run_dir.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>

#include "kiln/errors.hpp"

namespace kiln::io {
namespace fs = std::filesystem;

fs::path plan_run_dir(const std::string& requested, RunDirMode mode) {
  std::error_code ec;
  fs::path dir;
  if (mode == RunDirMode::resume) {
    if (requested.empty()) {
      throw IoError("--resume continues an existing run: name its directory with --run-dir (or run.run_dir)");
    }
    if (!fs::is_directory(requested, ec)) {
      throw IoError(fmt::format("--resume: run directory {} does not exist", requested));
    }
    dir = requested;
  } else if (!requested.empty()) {
    dir = requested;
    if (fs::exists(dir / "metrics.jsonl", ec)) {
      throw IoError(fmt::format("run directory {} already holds a run (metrics.jsonl); choose another "
                                "--run-dir or move the old run away",
                                dir.string()));
    }
  } else {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    const std::string stamp = fmt::format("{:%Y%m%d-%H%M%S}", fmt::localtime(now));
    dir = fs::path("runs") / stamp;
    for (int i = 2; fs::exists(dir, ec); ++i) dir = fs::path("runs") / fmt::format("{}-{}", stamp, i);
  }
  return dir;
}

void create_run_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);
  if (ec) throw IoError(fmt::format("cannot create run directory {}: {}", dir.string(), ec.message()));
}

fs::path prepare_run_dir(const std::string& requested, RunDirMode mode) {
  fs::path dir = plan_run_dir(requested, mode);
  create_run_dir(dir);
  return dir;
}

}  // namespace kiln::io
