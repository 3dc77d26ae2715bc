// Atomic, durable file writes (contract in kiln/io/atomic_file.hpp), in POSIX calls so that each
// failure keeps its errno: an ofstream reports only that something failed.
#include "kiln/io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "kiln/errors.hpp"

namespace kiln::io {
namespace fs = std::filesystem;
namespace {

/// Closes the descriptor when the scope ends, unless close() was already called (and checked).
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  /// close() with its result: on NFS a write error may first show here.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

/// Writes all of `contents` to `fd`; returns the bytes written before a failure (errno set), or
/// contents.size().
std::size_t write_all(int fd, const std::string& contents) {
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;  // a regular file does not take zero bytes without a reason
      return done;
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& contents) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("cannot create {}: {}", tmp.string(), std::strerror(errno)));
  Descriptor file(fd);

  // Every failure below removes the temp file (a partial one would only take space) and says
  // that the target is untouched, which is the question a user asks next.
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    std::error_code ec;  // a failure to look is not worth hiding the write's own error
    const bool replaces = fs::exists(path, ec);
    return IoError(fmt::format("{}: {}{}", what, std::strerror(err),
                               replaces ? "; the file it replaces is unchanged" : ""));
  };
  const std::size_t written = write_all(file.get(), contents);
  if (written != contents.size()) {
    const int err = errno;
    throw fail(fmt::format("cannot write {} ({} of {} bytes written)", tmp.string(), written, contents.size()), err);
  }
  if (::fsync(file.get()) != 0) {
    const int err = errno;
    throw fail(fmt::format("cannot write {} to disk (fsync)", tmp.string()), err);
  }
  if (file.close() != 0) {
    const int err = errno;
    throw fail(fmt::format("cannot write {} (close)", tmp.string()), err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    throw fail(fmt::format("cannot rename {} to {}", tmp.string(), path.string()), err);
  }
  sync_directory(path.has_parent_path() ? path.parent_path() : fs::path("."));
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw IoError(fmt::format("cannot open directory {} to sync it: {}", dir.string(), std::strerror(errno)));
  Descriptor d(fd);
  if (::fsync(d.get()) != 0 && errno != EINVAL) {
    throw IoError(fmt::format("cannot sync directory {}: {}", dir.string(), std::strerror(errno)));
  }
}

}  // namespace kiln::io
