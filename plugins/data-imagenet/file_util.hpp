// Small POSIX file helpers shared by both layouts: an owning descriptor and exact pread.
//
// pread keeps one descriptor usable from several threads without a shared file position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::imagenet {

class File {
 public:
  /// Opens `path` read-only; throws DataError naming the path and errno text.
  explicit File(const std::string& path);
  File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  std::uint64_t size() const;
  /// Reads exactly `size` bytes at `offset`; returns false at end of file before `size` bytes.
  /// Throws DataError on an I/O error.
  bool read_at(std::uint64_t offset, void* out, std::size_t size) const;
  const std::string& path() const noexcept { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

/// Reads the whole file into the start of `out` and returns its size. `out` is grown as needed,
/// never shrunk (no zero-fill of bytes the read overwrites; reuse one per thread). Throws
/// DataError if it is larger than `max_bytes` ("... is N bytes, over max_record_bytes = M") or
/// cannot be read.
std::size_t read_whole_file(const std::string& path, std::uint64_t max_bytes, std::vector<unsigned char>& out);

/// Whether a file name ends in any case of .jpeg, .jpg or .png: the files both image layouts list.
bool is_image_name(const std::string& name);

}  // namespace kiln::imagenet
