// TCP plumbing for communicator plugins (see kiln/sdk/tcp_link.hpp).
#include "kiln/sdk/tcp_link.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace kiln::sdk {
namespace {

std::string system_error(const char* what) { return fmt::format("{}: {}", what, std::strerror(errno)); }

int milliseconds_until(TcpClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - TcpClock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

// Collectives are latency-bound at small sizes: send each frame at once (no Nagle delay).
void set_no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

TcpError::~TcpError() = default;

TcpLink& TcpLink::operator=(TcpLink&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

TcpLink::~TcpLink() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpLink::wait_ready(short events, TcpClock::time_point deadline, const char* doing) const {
  for (;;) {
    if (TcpClock::now() >= deadline) throw TcpError(fmt::format("timed out {}", doing));
    pollfd p{fd_, events, 0};
    const int ready = ::poll(&p, 1, milliseconds_until(deadline));
    if (ready > 0) return;  // readable, writable, or hung up: the next recv/send says which
    if (ready < 0 && errno != EINTR) throw TcpError(system_error("poll"));
  }
}

void TcpLink::send_all(const void* data, std::size_t n, TcpClock::time_point deadline) const {
  const auto* bytes = static_cast<const char*>(data);
  while (n > 0) {
    wait_ready(POLLOUT, deadline, "sending");
    // MSG_NOSIGNAL: a closed peer is an EPIPE error here, not a SIGPIPE that ends the process.
    const ssize_t sent = ::send(fd_, bytes, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw TcpError(errno == EPIPE || errno == ECONNRESET ? "the peer closed the connection" : system_error("send"));
    }
    bytes += sent;
    n -= static_cast<std::size_t>(sent);
  }
}

void TcpLink::recv_all(void* data, std::size_t n, TcpClock::time_point deadline) const {
  auto* bytes = static_cast<char*>(data);
  while (n > 0) {
    wait_ready(POLLIN, deadline, "waiting for data");
    const ssize_t got = ::recv(fd_, bytes, n, MSG_DONTWAIT);
    if (got == 0) throw TcpError("the peer closed the connection");
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw TcpError(errno == ECONNRESET ? "the peer closed the connection" : system_error("recv"));
    }
    bytes += got;
    n -= static_cast<std::size_t>(got);
  }
}

void TcpLink::shut_down() const noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

TcpListener::TcpListener() {
  // IPv6 with IPv4 mapped in, so peers reach it over either; IPv4 alone where the kernel has no
  // IPv6. Any free port: the caller publishes it (through the store).
  sockaddr_storage address{};
  socklen_t length = 0;
  fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ >= 0) {
    const int off = 0;
    ::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = in6addr_any;
    length = sizeof(sockaddr_in6);
  } else {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw TcpError(system_error("socket"));
    auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    length = sizeof(sockaddr_in);
  }
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd_, 128) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = system_error("listening for the other ranks");
    ::close(fd_);
    throw TcpError(error);
  }
  port_ = ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

TcpListener::~TcpListener() { ::close(fd_); }

TcpLink TcpListener::accept(TcpClock::time_point deadline) const {
  for (;;) {
    if (TcpClock::now() >= deadline) throw TcpError("timed out");
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, milliseconds_until(deadline));
    if (ready < 0 && errno != EINTR) throw TcpError(system_error("poll"));
    if (ready <= 0) continue;
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      throw TcpError(system_error("accept"));
    }
    set_no_delay(fd);
    return TcpLink(fd);
  }
}

TcpLink tcp_connect(const std::string& host, std::uint16_t port, TcpClock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;  // a name, an IPv4 or an IPv6 address
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    throw TcpError(fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc)));
  }
  sockaddr_storage address{};
  const int family = found->ai_family;
  const socklen_t length = found->ai_addrlen;
  std::memcpy(&address, found->ai_addr, std::min<std::size_t>(length, sizeof address));
  ::freeaddrinfo(found);
  // Non-blocking, so that an unreachable host costs the deadline, not the kernel's SYN retries.
  for (;;) {
    const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) throw TcpError(system_error("socket"));
    int error = 0;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        error = ::poll(&p, 1, milliseconds_until(deadline)) > 0 ? 0 : ETIMEDOUT;
        socklen_t length = sizeof error;
        if (error == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      }
    }
    if (error == 0) {
      set_no_delay(fd);
      return TcpLink(fd);
    }
    ::close(fd);
    if (error != ECONNREFUSED && error != ETIMEDOUT && error != EINTR) {
      throw TcpError(fmt::format("connecting to {}:{}: {}", host, port, std::strerror(error)));
    }
    if (TcpClock::now() >= deadline) throw TcpError(fmt::format("timed out connecting to {}:{}", host, port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace kiln::sdk
