// POSIX file helpers; errors are DataErrors naming the path and the system's reason.
#include "file_util.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "kiln/errors.hpp"

namespace kiln::imagenet {

File::File(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t File::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    throw DataError(fmt::format("{}: cannot stat: {}", path_, std::strerror(errno)));
  }
  return static_cast<std::uint64_t>(st.st_size);
}

bool File::read_at(std::uint64_t offset, void* out, std::size_t size) const {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw DataError(fmt::format("{}: read of {} bytes at offset {} failed: {}", path_, size,
                                  offset, std::strerror(errno)));
    }
    if (n == 0) return false;
    p += n;
    offset += static_cast<std::uint64_t>(n);
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::size_t read_whole_file(const std::string& path, std::uint64_t max_bytes,
                            std::vector<unsigned char>& out) {
  File file(path);
  const std::uint64_t size = file.size();
  if (size > max_bytes) {
    throw DataError(fmt::format("{}: file is {} bytes, over max_record_bytes = {}; raise "
                                "max_record_bytes if the file is genuine",
                                path, size, max_bytes));
  }
  const auto bytes = static_cast<std::size_t>(size);
  if (out.size() < bytes) out.resize(bytes);
  if (!file.read_at(0, out.data(), bytes)) {
    throw DataError(fmt::format("{}: file shrank while being read (expected {} bytes)", path, size));
  }
  return bytes;
}

bool is_image_name(const std::string& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == "jpeg" || ext == "jpg" || ext == "png";
}

}  // namespace kiln::imagenet
