// FileStore: keys as files in a directory (see kiln/dist/file_store.hpp).
//
// File names: "k_<key>" holds a value, "l_<key>" is add()'s lock file, ".tmp_*" are writes in
// progress; the key is percent-encoded so any key maps to one flat file name.
#include "kiln/dist/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include "counter_value.hpp"
#include "kiln/errors.hpp"
#include "missing_keys.hpp"

namespace kiln::dist {
namespace {

namespace fs = std::filesystem;

std::string encode_key(const std::string& key) {
  std::string out;
  for (const unsigned char c : key) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
        c == '_' || c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::optional<std::vector<std::uint8_t>> read_if_present(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Holds an exclusive flock on a lock file for the lifetime of the object.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw IoError(fmt::format("cannot open store lock file {}: {}; check that the store "
                                "directory is writable", path.string(), std::strerror(errno)));
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd_);
      throw IoError(fmt::format("cannot lock store file {}: {}; the filesystem must support "
                                "flock (NFS needs lockd)", path.string(), std::strerror(err)));
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

FileStore::FileStore(fs::path dir, int world_size) : dir_(std::move(dir)), world_size_(world_size) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) {
    throw IoError(fmt::format("cannot create the rendezvous store directory {}: {}; choose a "
                              "writable path (shared by all nodes for a multi-node run)",
                              dir_.string(), ec ? ec.message() : "not a directory"));
  }
}

fs::path FileStore::path_of(const std::string& key) const { return dir_ / ("k_" + encode_key(key)); }

std::size_t FileStore::remove_keys() {
  // Listed first, removed after: a directory changed while it is read may list an entry twice.
  std::vector<fs::path> keys;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("k_") || name.starts_with("l_")) keys.push_back(it->path());
  }
  std::size_t removed = 0;
  for (const fs::path& key : keys) removed += fs::remove(key, ec) ? 1 : 0;  // one left is named next run
  return removed;
}

std::size_t FileStore::remove_keys(const std::vector<std::string>& keys) {
  std::size_t removed = 0;
  std::error_code ec;
  for (const std::string& key : keys) removed += fs::remove(path_of(key), ec) ? 1 : 0;
  return removed;
}

void FileStore::write_atomically(const fs::path& target, const std::vector<std::uint8_t>& value) {
  static std::atomic<std::uint64_t> counter{0};
  const fs::path tmp = dir_ / fmt::format(".tmp_{}_{}_{}", ::getpid(), counter.fetch_add(1),
                                          target.filename().string());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw IoError(fmt::format("cannot write store file {}: {}; check that the store directory is "
                              "writable", tmp.string(), std::strerror(errno)));
  }
  std::size_t done = 0;
  while (done < value.size()) {
    const ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IoError(fmt::format("cannot write store file {}: {}", tmp.string(), std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw IoError(fmt::format("cannot rename {} to {}: {}", tmp.string(), target.string(),
                              std::strerror(err)));
  }
}

void FileStore::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  write_atomically(path_of(key), value);
}

std::vector<std::uint8_t> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  auto value = read_if_present(path_of(key));
  if (!value) {
    throw CommError(fmt::format("store key '{}' ({}) disappeared after it was written; is another "
                                "run using the same store directory?", key, path_of(key).string()));
  }
  return *std::move(value);
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  const fs::path target = path_of(key);
  FileLock lock(dir_ / ("l_" + encode_key(key)));
  const auto current = read_if_present(target);
  const std::int64_t value =
      (current ? detail::parse_counter(*current, key, dir_.string()) : 0) + delta;
  write_atomically(target, detail::format_counter(value));
  return value;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  // Poll: cheap on a local disk, and a shared filesystem offers nothing better portable.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  std::vector<std::string> missing = keys;
  for (;;) {
    std::erase_if(missing, [&](const std::string& key) {
      std::error_code ec;  // unreadable counts as not there yet; the timeout names it
      return fs::exists(path_of(key), ec);
    });
    if (missing.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  throw detail::StoreTimeout(missing, timeout, world_size_,
                             fmt::format("file store {}", dir_.string()));
}

}  // namespace kiln::dist
