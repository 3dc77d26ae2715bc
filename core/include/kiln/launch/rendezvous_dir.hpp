// The private rendezvous directory of one `kiln train --nproc` job.
//
// Made with mkdtemp as <TMPDIR>/kiln-rendezvous-XXXXXX and removed when the job ends. A
// supervisor killed with SIGKILL cannot remove it (its ranks die with it, PR_SET_PDEATHSIG), so
// each directory holds a file "supervisor" with the owner's pid and start time, and the next
// job's supervisor removes the directories whose supervisor no longer exists (same user only:
// mkdtemp makes them 0700, so another user's are not ours to judge).
#pragma once

#include <filesystem>

namespace kiln::launch {

class RendezvousDir {
 public:
  /// Sweeps stale directories of earlier jobs in `parent`, then creates this job's.
  /// Throws IoError if it cannot be created.
  explicit RendezvousDir(const std::filesystem::path& parent = std::filesystem::temp_directory_path());
  ~RendezvousDir();
  RendezvousDir(const RendezvousDir&) = delete;
  RendezvousDir& operator=(const RendezvousDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Removes the kiln-rendezvous-* directories in `parent` whose "supervisor" file names a process
/// that no longer exists; returns how many. Directories without that file are left alone.
int remove_stale_rendezvous_dirs(const std::filesystem::path& parent);

}  // namespace kiln::launch
