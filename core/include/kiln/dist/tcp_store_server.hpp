// TcpStoreServer: the key-value store rank 0 serves for a `tcp://host:port` rendezvous.
//
// One thread runs a poll() loop over the listening socket and every client connection
// (docs/distributed.md, "The TCP store protocol"; the frames are in core/dist/tcp_wire.hpp).
// GET and WAIT for keys not yet there are parked, not blocking: they are answered as soon as a
// SET/ADD makes them complete, or with TIMEOUT (the missing keys) when their deadline passes.
//
// Hostile or broken clients cannot crash or exhaust it: a frame over the size limit, malformed
// fields, a first message that is not HELLO, or no HELLO within kHelloWithin (10 s) gets an
// ERROR reply (when possible) and the connection is closed; a connection is read only while it
// has no request in progress, so no client can queue unbounded work; connections are capped
// (kMaxConnections) and so are the bytes stored (kMaxStoredBytes). A client that disconnects,
// even with a request parked, is dropped at once and loses only its own request. Nothing a
// client sends can stop the server.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace kiln::dist {

class TcpStoreServer {
 public:
  static constexpr std::size_t kMaxConnections = 1024;
  static constexpr std::size_t kMaxStoredBytes = std::size_t{256} << 20;

  /// A client that has not said HELLO this long after connecting is sent an ERROR and dropped.
  static constexpr std::chrono::milliseconds kHelloWithin{10'000};

  /// Listens on every IPv4 interface at `port` (0: a free port the kernel chooses; see port()).
  /// Throws CommError naming the port if it cannot (for example, it is already in use).
  /// `hello_within` is shorter only in tests.
  explicit TcpStoreServer(int port, std::chrono::milliseconds hello_within = kHelloWithin);
  ~TcpStoreServer();  ///< stops the thread and closes every connection
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port it listens on.
  int port() const noexcept;
  /// Client connections held now (updated once per loop turn; for tests and diagnostics).
  std::size_t open_connections() const noexcept;

  class Loop;  // the poll loop (tcp_store_server.cpp)

 private:
  std::unique_ptr<Loop> loop_;
};

}  // namespace kiln::dist
