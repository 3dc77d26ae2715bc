// Socket helpers with deadlines (see socket_io.hpp).
#include "socket_io.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kiln::dist::net {
namespace {

/// Milliseconds left until `deadline` for poll(), at least 0 and at most a minute per call.
int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
}

/// Waits for `events` on `fd` until `deadline`; false on timeout.
IoResult wait_for(int fd, short events, Clock::time_point deadline, std::string& error) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms(deadline));
    if (n > 0) return IoResult::ok;
    if (n < 0 && errno != EINTR) {
      error = std::strerror(errno);
      return IoResult::failed;
    }
    if (n == 0 && Clock::now() >= deadline) {
      error = "timed out";
      return IoResult::timed_out;
    }
  }
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

std::vector<sockaddr_in> resolve_ipv4(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  std::vector<sockaddr_in> out;
  if (rc != 0) {
    error = fmt::format("cannot resolve host '{}': {}", host, ::gai_strerror(rc));
    return out;
  }
  for (addrinfo* a = found; a; a = a->ai_next) {
    sockaddr_in addr{};
    std::memcpy(&addr, a->ai_addr, sizeof addr);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool seen = std::any_of(out.begin(), out.end(), [&](const sockaddr_in& o) {
      return o.sin_addr.s_addr == addr.sin_addr.s_addr;
    });
    if (!seen) out.push_back(addr);
  }
  ::freeaddrinfo(found);
  if (out.empty()) error = fmt::format("host '{}' has no IPv4 address", host);
  return out;
}

std::string to_string(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return fmt::format("{}:{}", text, ntohs(addr.sin_port));
}

Fd connect_once(const sockaddr_in& addr, Clock::time_point deadline, std::string& error) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    error = fmt::format("socket(): {}", std::strerror(errno));
    return {};
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) {
      error = std::strerror(errno);
      return {};
    }
    if (wait_for(fd.get(), POLLOUT, deadline, error) != IoResult::ok) return {};
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      error = std::strerror(err);
      return {};
    }
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

IoResult send_all(int fd, const std::vector<std::uint8_t>& bytes, Clock::time_point deadline, std::string& error) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    if (const IoResult w = wait_for(fd, POLLOUT, deadline, error); w != IoResult::ok) return w;
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      error = std::strerror(errno);
      return errno == EPIPE || errno == ECONNRESET ? IoResult::closed : IoResult::failed;
    }
    done += static_cast<std::size_t>(n);
  }
  return IoResult::ok;
}

IoResult recv_exact(int fd, std::uint8_t* out, std::size_t n, Clock::time_point deadline, std::string& error) {
  std::size_t done = 0;
  while (done < n) {
    if (const IoResult w = wait_for(fd, POLLIN, deadline, error); w != IoResult::ok) return w;
    const ssize_t got = ::recv(fd, out + done, n - done, MSG_DONTWAIT);
    if (got == 0) {
      error = "connection closed by the peer";
      return IoResult::closed;
    }
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      error = std::strerror(errno);
      return errno == ECONNRESET ? IoResult::closed : IoResult::failed;
    }
    done += static_cast<std::size_t>(got);
  }
  return IoResult::ok;
}

}  // namespace kiln::dist::net
