// TCP plumbing for the `star` communicator: a listening socket, a connection to it, and whole-
// buffer sends and receives that give up at a deadline. Nothing here knows about ranks or
// collectives; failures are LinkErrors saying what happened ("timed out after 2.0 s", "the peer
// closed the connection"), which the communicator turns into CommErrors naming the op and rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace star {

using Clock = std::chrono::steady_clock;

struct LinkError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One connected TCP socket (owned; closed on destruction).
class Link {
 public:
  Link() = default;
  explicit Link(int fd) : fd_(fd) {}
  Link(Link&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Link& operator=(Link&& other) noexcept;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;
  ~Link();

  bool valid() const { return fd_ >= 0; }
  /// Sends or receives exactly `n` bytes, or throws LinkError when `deadline` passes first, the
  /// peer closes the connection, or the socket fails.
  void send_all(const void* data, std::size_t n, Clock::time_point deadline) const;
  void recv_all(void* data, std::size_t n, Clock::time_point deadline) const;
  /// Ends the connection in both directions without closing the descriptor, so that a call
  /// blocked in another thread returns at once (abort()). Safe from any thread.
  void shut_down() const noexcept;

 private:
  /// Waits until the socket is ready for `events` (POLLIN/POLLOUT) or `deadline` passes.
  void wait_ready(short events, Clock::time_point deadline, const char* doing) const;

  int fd_ = -1;
};

/// A socket listening on every IPv4 address, on a port the kernel picks.
class Listener {
 public:
  Listener();
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  std::uint16_t port() const { return port_; }
  /// The next incoming connection, or LinkError when `deadline` passes first.
  Link accept(Clock::time_point deadline) const;

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

/// Connects to host:port, retrying refused connections until `deadline` (the listener may not
/// be up yet when the address is read).
Link connect_to(const std::string& host, std::uint16_t port, Clock::time_point deadline);

}  // namespace star
