// TcpStore: a rendezvous store served over TCP by rank 0, for runs without a shared filesystem
// (`dist.rendezvous = "tcp://host:port"`, chosen automatically under torchrun and mpirun; see
// docs/distributed.md).
//
// Rank 0 owns a TcpStoreServer (listening on every interface at the port) and talks to it over
// loopback like any other client; every other rank connects to host:port, retrying until
// `connect_timeout` passes, so ranks may start in any order. Each call takes a connection from a
// small pool (opening one if none is free), so concurrent calls from several threads never wait
// on each other. GET/WAIT are parked at the server and answered when the keys arrive or with the
// missing keys at the timeout.
//
// Failure is always an error, never a hang: no server within connect_timeout ("could not reach
// ... served by rank 0 ... connection refused"), the server gone (rank 0 died: "lost the
// connection"), or a server that stops answering (rank 0 hung or its host vanished: no reply
// within the request's timeout plus kReplyGrace). Messages name the endpoint and both ranks.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/dist/tcp_store_server.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/store.hpp"

namespace kiln::dist {

struct TcpStoreOptions {
  /// Addresses rank 0 may be reached at, tried in turn (a name or dotted quad each). A
  /// `tcp://host:port` spec gives one; the MPI exchange gives every address of rank 0's host.
  std::vector<std::string> hosts;
  int port = 0;  ///< the server's port; 0 only with serve (the kernel picks one; see port())
  int rank = 0;
  int world_size = 0;                           ///< only for messages ("rank 3 of 8")
  bool serve = false;                           ///< this process runs the server (rank 0)
  std::chrono::milliseconds connect_timeout{300'000};  ///< also bounds SET/ADD replies
  WaitReport connect_report;  ///< says, while a client retries, that it cannot reach the server yet
};

class TcpStore final : public Store {
 public:
  /// How much longer than a GET/WAIT's own timeout a client waits for the server's answer
  /// before it concludes the server is hung.
  static constexpr std::chrono::seconds kReplyGrace{10};

  /// With serve, starts the server first (CommError if the port cannot be bound). Connects
  /// lazily: the first call waits for the server.
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override;
  std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  /// The port of the server (the actual one when serving on port 0).
  int port() const noexcept { return port_; }
  /// "tcp://host:port" with the first host, for messages and the banner.
  std::string endpoint() const;
  /// The server this process runs (rank 0), else nullptr.
  const TcpStoreServer* server() const noexcept { return server_.get(); }

 private:
  /// Sends one request frame on a pooled connection and returns the reply's body; throws
  /// CommError (naming `what`) if the server cannot be reached, goes away or stays silent.
  std::vector<std::uint8_t> round_trip(const std::vector<std::uint8_t>& frame,
                                       std::chrono::steady_clock::time_point reply_deadline, const std::string& what);
  int take_connection();
  void give_back(int fd);
  std::string who() const;  ///< "rank 3 of 8"

  TcpStoreOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  int port_ = 0;
  std::mutex pool_mutex_;
  std::vector<int> idle_;  ///< connected sockets not in use (owned; closed by the destructor)
};

}  // namespace kiln::dist
