// Claiming a run directory: one `kiln train` (its rank 0) per directory at a time.
//
// Two starts could otherwise share a directory and overwrite each other's checkpoints, config
// and metrics: a sweep launched in parallel (`for lr in ...; do kiln train ... & done`) whose
// runs start in the same second and pick the same default runs/<stamp>, or a second
// `--resume auto` (a requeued job) while the first still runs. The claim prevents both:
//   - a default directory is made with one mkdir, which only one process can win, so a start
//     that finds its name taken moves on to <stamp>-2, -3 ...;
//   - the directory is then locked (flock on the directory itself, so the claim adds no file)
//     for as long as the claim lives; another start in it is refused with the holder's pid and
//     host where its status.json names them. The lock goes with the process, however it ends.
//   - a fresh start is checked again under the lock for a run already there (metrics.jsonl), as
//     one may have finished between planning and claiming.
// Where the file system cannot lock (some NFS mounts refuse flock on a directory), the run
// warns once that a second start in the same directory would not be refused, and goes on.
// A start that fails removes the folders it made (RunDirRollback); one ended by a signal before
// its start is committed (Ctrl-C while the ranks meet) leaves a made folder behind, empty, which
// `kiln runs` passes over and a later start in it accepts.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kiln/io/run_dir.hpp"

namespace kiln::io {

class RunDirClaim {
 public:
  /// Plans the directory as plan_run_dir() does, creates it (with missing parents) and locks it.
  /// Throws IoError naming the directory when another start holds it, when a fresh start finds a
  /// run there, or when it cannot be created; what this call created is removed again then.
  static RunDirClaim take(const std::string& requested, RunDirMode mode);

  RunDirClaim(RunDirClaim&& other) noexcept;
  RunDirClaim& operator=(RunDirClaim&&) = delete;
  RunDirClaim(const RunDirClaim&) = delete;
  RunDirClaim& operator=(const RunDirClaim&) = delete;
  ~RunDirClaim();  ///< releases the lock; the directory stays

  const std::filesystem::path& dir() const { return dir_; }
  /// The folders this claim created, outermost first (the run directory last); empty when the
  /// directory existed. RunDirRollback removes them again if the start fails.
  const std::vector<std::filesystem::path>& created() const { return created_; }
  /// Why the directory could not be locked ("" when it is locked).
  const std::string& unlocked_reason() const { return unlocked_reason_; }

 private:
  RunDirClaim(std::filesystem::path dir, std::vector<std::filesystem::path> created, int fd, std::string unlocked);
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> created_;
  int lock_fd_ = -1;
  std::string unlocked_reason_;
};

/// Whether a `kiln train` holds `dir` now (its lock is taken); false where the file system
/// cannot tell.
bool run_dir_in_use(const std::filesystem::path& dir);

}  // namespace kiln::io
