// RunDirClaim: a run directory made and locked for one start (rules in run_dir_claim.hpp).
#include "kiln/io/run_dir_claim.hpp"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "kiln/errors.hpp"
#include "kiln/io/run_status.hpp"

namespace kiln::io {
namespace fs = std::filesystem;

namespace {

/// Removes the folders a failed claim made, innermost first; rmdir leaves any that another
/// process has put something in meanwhile.
void remove_created(const std::vector<fs::path>& created) {
  for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
}

/// Makes `dir` with mkdir; true if this call made it, false if it was there. Throws otherwise.
bool make_folder(const fs::path& dir, const std::vector<fs::path>& created) {
  if (::mkdir(dir.c_str(), 0777) == 0) return true;
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return false;
  remove_created(created);
  throw IoError(fmt::format("cannot create run directory {}: {}", dir.string(),
                            err == EEXIST ? "a file of that name is in the way" : std::strerror(err)));
}

/// Makes the folders on the way to `dir` that are missing, recording those this call made.
void make_parents(const fs::path& dir, std::vector<fs::path>& created) {
  fs::path up;
  for (const auto& part : dir.parent_path()) {
    up /= part;
    std::error_code ec;
    if (fs::is_directory(up, ec)) continue;
    if (make_folder(up, created)) created.push_back(up);
  }
}

/// runs/<stamp>, or <stamp>-2, -3 ... when taken: whichever mkdir this process wins.
fs::path make_default_dir(std::vector<fs::path>& created) {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  const std::string stamp = fmt::format("{:%Y%m%d-%H%M%S}", fmt::localtime(now));
  const fs::path runs("runs");
  if (make_folder(runs, created)) created.push_back(runs);
  for (int i = 1;; ++i) {
    const fs::path dir = runs / (i == 1 ? stamp : fmt::format("{}-{}", stamp, i));
    if (make_folder(dir, created)) {
      created.push_back(dir);
      return dir;
    }
  }
}

std::string holder_of(const fs::path& dir) {
  const auto status = read_run_status(dir);
  if (status && status->state == "running") {
    return fmt::format("pid {} on host {}; its status.json says running, {} of {} epochs done", status->pid,
                       status->host, status->epoch, status->epochs);
  }
  return "still starting: it has not written a running status.json yet";
}

}  // namespace

RunDirClaim RunDirClaim::take(const std::string& requested, RunDirMode mode) {
  std::vector<fs::path> created;
  fs::path dir;
  if (mode == RunDirMode::fresh && requested.empty()) {
    dir = make_default_dir(created);
  } else {
    dir = plan_run_dir(requested, mode);  // an explicit folder: checked (exists to resume, no run to start fresh)
    if (!dir.has_filename()) dir = dir.parent_path();  // "runs/a/" is the folder "runs/a"
    make_parents(dir, created);
    if (make_folder(dir, created)) created.push_back(dir);
  }

  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    remove_created(created);
    throw IoError(fmt::format("cannot open run directory {}: {}", dir.string(), std::strerror(err)));
  }
  std::string unlocked;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      // Nothing made here is removed: the holder may have found and locked the folder this
      // call made, an instant after the mkdir.
      ::close(fd);
      throw IoError(fmt::format("run directory {} is in use by another kiln train ({}); wait for it to end or stop "
                                "it, or choose another --run-dir",
                                dir.string(), holder_of(dir)));
    }
    unlocked = std::strerror(err);
  }
  RunDirClaim claim(dir, std::move(created), unlocked.empty() ? fd : -1, unlocked);
  if (!unlocked.empty()) ::close(fd);
  // A run may have ended in the folder between plan_run_dir's look and the lock.
  std::error_code ec;
  if (mode == RunDirMode::fresh && fs::exists(dir / "metrics.jsonl", ec)) {
    throw IoError(fmt::format("run directory {} already holds a run (metrics.jsonl); choose another --run-dir or "
                              "move the old run away",
                              dir.string()));
  }
  return claim;
}

RunDirClaim::RunDirClaim(fs::path dir, std::vector<fs::path> created, int fd, std::string unlocked)
    : dir_(std::move(dir)), created_(std::move(created)), lock_fd_(fd), unlocked_reason_(std::move(unlocked)) {}

RunDirClaim::RunDirClaim(RunDirClaim&& other) noexcept
    : dir_(std::move(other.dir_)),
      created_(std::move(other.created_)),
      lock_fd_(std::exchange(other.lock_fd_, -1)),
      unlocked_reason_(std::move(other.unlocked_reason_)) {}

RunDirClaim::~RunDirClaim() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing the last descriptor releases the flock
}

bool run_dir_in_use(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the shared lock, if it was taken
  return held;
}

}  // namespace kiln::io
