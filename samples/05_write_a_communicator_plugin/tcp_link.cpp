// TCP plumbing for the `star` communicator (see tcp_link.hpp).
#include "tcp_link.hpp"

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

namespace star {
namespace {

std::string system_error(const char* what) { return fmt::format("{}: {}", what, std::strerror(errno)); }

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

// Collectives are latency-bound at small sizes: send each frame at once (no Nagle delay).
void set_no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

Link& Link::operator=(Link&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Link::~Link() {
  if (fd_ >= 0) ::close(fd_);
}

void Link::wait_ready(short events, Clock::time_point deadline, const char* doing) const {
  for (;;) {
    if (Clock::now() >= deadline) throw LinkError(fmt::format("timed out {}", doing));
    pollfd p{fd_, events, 0};
    const int ready = ::poll(&p, 1, milliseconds_until(deadline));
    if (ready > 0) return;  // readable, writable, or hung up: the next recv/send says which
    if (ready < 0 && errno != EINTR) throw LinkError(system_error("poll"));
  }
}

void Link::send_all(const void* data, std::size_t n, Clock::time_point deadline) const {
  const auto* bytes = static_cast<const char*>(data);
  while (n > 0) {
    wait_ready(POLLOUT, deadline, "sending");
    // MSG_NOSIGNAL: a closed peer is an EPIPE error here, not a SIGPIPE that ends the process.
    const ssize_t sent = ::send(fd_, bytes, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw LinkError(errno == EPIPE || errno == ECONNRESET ? "the peer closed the connection" : system_error("send"));
    }
    bytes += sent;
    n -= static_cast<std::size_t>(sent);
  }
}

void Link::recv_all(void* data, std::size_t n, Clock::time_point deadline) const {
  auto* bytes = static_cast<char*>(data);
  while (n > 0) {
    wait_ready(POLLIN, deadline, "waiting for data");
    const ssize_t got = ::recv(fd_, bytes, n, MSG_DONTWAIT);
    if (got == 0) throw LinkError("the peer closed the connection");
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw LinkError(errno == ECONNRESET ? "the peer closed the connection" : system_error("recv"));
    }
    bytes += got;
    n -= static_cast<std::size_t>(got);
  }
}

void Link::shut_down() const noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Listener::Listener() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw LinkError(system_error("socket"));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;  // any free port; it is published through the store
  socklen_t length = sizeof address;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd_, 128) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = system_error("listening for the other ranks");
    ::close(fd_);
    throw LinkError(error);
  }
  port_ = ntohs(address.sin_port);
}

Listener::~Listener() { ::close(fd_); }

Link Listener::accept(Clock::time_point deadline) const {
  for (;;) {
    if (Clock::now() >= deadline) throw LinkError("timed out");
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, milliseconds_until(deadline));
    if (ready < 0 && errno != EINTR) throw LinkError(system_error("poll"));
    if (ready <= 0) continue;
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      throw LinkError(system_error("accept"));
    }
    set_no_delay(fd);
    return Link(fd);
  }
}

Link connect_to(const std::string& host, std::uint16_t port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    throw LinkError(fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc)));
  }
  const sockaddr_in address = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  // Non-blocking, so that an unreachable host costs the deadline, not the kernel's SYN retries.
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) throw LinkError(system_error("socket"));
    int error = 0;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
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
      return Link(fd);
    }
    ::close(fd);
    if (error != ECONNREFUSED && error != ETIMEDOUT && error != EINTR) {
      throw LinkError(fmt::format("connecting to {}:{}: {}", host, port, std::strerror(error)));
    }
    if (Clock::now() >= deadline) throw LinkError(fmt::format("timed out connecting to {}:{}", host, port));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace star
