// not_a_regular_file and read_regular_file (see file_kind.hpp).
#include "kiln/io/file_kind.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/errors.hpp"

namespace kiln::io {
namespace fs = std::filesystem;

std::string not_a_regular_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st)) return "";
  switch (st.type()) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO (named pipe)";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block:
    case fs::file_type::character: return "a device";
    default: return "not a regular file";
  }
}

std::string read_regular_file(const fs::path& path) {
  if (const std::string kind = not_a_regular_file(path); !kind.empty()) {
    throw DataError(fmt::format("{} is {}, not a file", path.string(), kind));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      bytes.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      ::close(fd);
      throw DataError(fmt::format("cannot read {}: {}", path.string(), std::strerror(err)));
    }
  }
  ::close(fd);
  return bytes;
}

}  // namespace kiln::io
