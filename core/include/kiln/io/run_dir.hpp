// The run directory: where a run's outputs go.
//
//   <run_dir>/config.toml      the resolved configuration (defaults written out)
//   <run_dir>/metrics.jsonl    one JSON object per epoch and split (MetricsWriter)
//   <run_dir>/logs/rank<N>.log every rank's full log
// Nothing already written is overwritten: an explicit directory that already holds a
// metrics.jsonl is refused (unless the run is being resumed, which appends); the default
// runs/<YYYYmmdd-HHMMSS> gets a -2, -3 ... suffix when taken (run_dir_claim.hpp). Files are written to a temporary name and renamed (kiln/io/atomic_file.hpp), so a crash never
// leaves half a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kiln::io {

/// fresh: a new run (an existing run there is refused); resume: continue the run in an existing
/// directory (--resume), whose outputs are appended to.
enum class RunDirMode : std::uint8_t { fresh, resume };

/// Validates the named run directory without creating anything: resume needs it to exist, a
/// fresh run needs it not to hold one. Throws IoError naming the path. The default
/// runs/<timestamp> is not planned but made, by RunDirClaim::take (run_dir_claim.hpp).
std::filesystem::path plan_run_dir(const std::string& requested, RunDirMode mode = RunDirMode::fresh);

/// Creates `dir` and its logs/ folder (a no-op where they exist). Throws IoError.
void create_run_dir(const std::filesystem::path& dir);


}  // namespace kiln::io
