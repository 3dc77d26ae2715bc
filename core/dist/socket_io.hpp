// Small blocking-with-deadline socket helpers for the TCP store's client (tcp_store.cpp) and
// the MPI address exchange: resolve, connect once, send a whole buffer, receive one frame.
// Every call takes an absolute deadline so no caller can wait forever on a silent peer.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::dist::net {

using Clock = std::chrono::steady_clock;

/// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// IPv4 addresses of `host` (a name or dotted quad); on failure an empty list and `error` set.
std::vector<sockaddr_in> resolve_ipv4(const std::string& host, int port, std::string& error);

/// One non-blocking connect to `addr`, waiting until `deadline`. Returns a connected blocking
/// socket with TCP_NODELAY, or an empty Fd and `error` (strerror text, or "timed out").
Fd connect_once(const sockaddr_in& addr, Clock::time_point deadline, std::string& error);

/// "a.b.c.d:port".
std::string to_string(const sockaddr_in& addr);

enum class IoResult { ok, closed, timed_out, failed };

/// Sends all of `bytes` before `deadline` (MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE).
IoResult send_all(int fd, const std::vector<std::uint8_t>& bytes, Clock::time_point deadline, std::string& error);

/// Receives exactly `n` bytes into `out` before `deadline`.
IoResult recv_exact(int fd, std::uint8_t* out, std::size_t n, Clock::time_point deadline, std::string& error);

}  // namespace kiln::dist::net
