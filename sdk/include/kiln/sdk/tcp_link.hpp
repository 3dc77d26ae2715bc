// TCP plumbing for communicator plugins: a listening socket, a connection to it, and whole-
// buffer sends and receives that give up at a deadline.
//
//   kiln::sdk::TcpListener listener;                       // rank 0: any free port
//   store.set("mine/port", ...listener.port()...);
//   kiln::sdk::TcpLink peer = listener.accept(deadline);
//   ...
//   kiln::sdk::TcpLink hub = kiln::sdk::tcp_connect(host, port, deadline);   // the others
//   hub.send_all(data, bytes, deadline);
//
// Every wait polls with the deadline, so a peer that died or stopped calling ends in a TcpError
// ("timed out waiting for data", "the peer closed the connection"), never in a hang; shut_down()
// from another thread wakes a blocked call at once (Communicator::abort()). Sockets are
// non-blocking with TCP_NODELAY (collectives are latency-bound at small sizes), close-on-exec,
// and a closed peer is an error, never a SIGPIPE. Nothing here knows ranks or collectives: the
// communicator wraps a TcpError into a CommError naming the op and the rank.
// Used by the `gloo` plugin's star path and samples/05_write_a_communicator_plugin.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/errors.hpp"

namespace kiln::sdk {

using TcpClock = std::chrono::steady_clock;

/// A failed TCP operation. A CommError, so one that escapes a communicator is still the right kind.
class TcpError : public CommError {
 public:
  using CommError::CommError;
  ~TcpError() override;
};

/// One connected TCP socket (owned; closed on destruction).
class TcpLink {
 public:
  TcpLink() = default;
  explicit TcpLink(int fd) : fd_(fd) {}
  TcpLink(TcpLink&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  TcpLink& operator=(TcpLink&& other) noexcept;
  TcpLink(const TcpLink&) = delete;
  TcpLink& operator=(const TcpLink&) = delete;
  ~TcpLink();

  bool valid() const { return fd_ >= 0; }
  /// Sends or receives exactly `n` bytes, or throws TcpError when `deadline` passes first, the
  /// peer closes the connection, or the socket fails.
  void send_all(const void* data, std::size_t n, TcpClock::time_point deadline) const;
  void recv_all(void* data, std::size_t n, TcpClock::time_point deadline) const;
  /// Ends the connection in both directions without closing the descriptor, so that a call
  /// blocked in another thread returns at once. Safe from any thread.
  void shut_down() const noexcept;

 private:
  void wait_ready(short events, TcpClock::time_point deadline, const char* doing) const;

  int fd_ = -1;
};

/// A socket listening on every IPv4 address, on a port the kernel picks.
class TcpListener {
 public:
  TcpListener();
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  std::uint16_t port() const { return port_; }
  /// The next incoming connection, or TcpError when `deadline` passes first.
  TcpLink accept(TcpClock::time_point deadline) const;

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

/// Connects to host:port (a name or an IPv4 address), retrying refused connections until
/// `deadline` (the listener may not be up yet when its address is read).
TcpLink tcp_connect(const std::string& host, std::uint16_t port, TcpClock::time_point deadline);

}  // namespace kiln::sdk
