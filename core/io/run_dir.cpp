// Run directory creation that never clobbers an earlier run.
#include "kiln/io/run_dir.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::io {
namespace fs = std::filesystem;

fs::path plan_run_dir(const std::string& requested, RunDirMode mode) {
  std::error_code ec;
  if (mode == RunDirMode::resume) {
    if (requested.empty()) {
      throw IoError("--resume continues an existing run: name its directory with --run-dir (or run.run_dir)");
    }
    if (!fs::is_directory(requested, ec)) {
      throw IoError(fmt::format("--resume: run directory {} does not exist", requested));
    }
    return requested;
  }
  if (requested.empty()) {
    throw Error("internal error: plan_run_dir needs a named folder; RunDirClaim::take makes the default one");
  }
  const fs::path dir = requested;
  if (fs::exists(dir / "metrics.jsonl", ec)) {
    throw IoError(fmt::format("run directory {} already holds a run (metrics.jsonl); choose another "
                              "--run-dir or move the old run away",
                              dir.string()));
  }
  return dir;
}

void create_run_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);
  if (ec) throw IoError(fmt::format("cannot create run directory {}: {}", dir.string(), ec.message()));
}


}  // namespace kiln::io
