// The TCP store's server: one poll() loop over the listener, a wake pipe and the clients (see
// kiln/dist/tcp_store_server.hpp for the guarantees, tcp_wire.hpp for the frames).
#include "kiln/dist/tcp_store_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "counter_value.hpp"
#include "kiln/errors.hpp"
#include "socket_io.hpp"
#include "tcp_wire.hpp"

namespace kiln::dist {

using net::Clock;

namespace {

/// A client's first frame (HELLO) may be at most this long, so connections that never speak the
/// protocol cannot make the server hold memory.
constexpr std::size_t kHelloFrame = 64;
/// GET/WAIT timeouts are capped at a week (as dist.timeout_s is) so deadlines cannot overflow.
constexpr std::uint64_t kMaxTimeoutMs = 604800ull * 1000;

/// A GET or WAIT whose keys are not all there yet.
struct Parked {
  wire::Op op = wire::Op::wait;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

struct Connection {
  net::Fd fd;
  bool said_hello = false;
  Clock::time_point hello_deadline;
  std::vector<std::uint8_t> in;   ///< the frame being read: header, then header + body
  std::vector<std::uint8_t> out;  ///< a reply being sent
  std::size_t out_at = 0;
  bool close_after_reply = false;
  bool dead = false;
  std::optional<Parked> parked;
};

}  // namespace

class TcpStoreServer::Loop {
 public:
  Loop(int port, std::chrono::milliseconds hello_within) : hello_within_(hello_within) {
    listener_ = net::Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listener_) throw CommError(fmt::format("cannot create the rendezvous store's socket: {}", std::strerror(errno)));
    const int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const int err = errno;
      throw CommError(fmt::format(
          "rank 0 cannot serve the rendezvous store on port {}: {}{}", port, std::strerror(err),
          err == EADDRINUSE ? " (another program, or an earlier run, holds it; choose another port in "
                              "tcp://host:port)"
                            : ""));
    }
    if (::listen(listener_.get(), 512) != 0) {
      throw CommError(fmt::format("rank 0 cannot listen on port {}: {}", port, std::strerror(errno)));
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw CommError(fmt::format("cannot create the rendezvous store's wake pipe: {}", std::strerror(errno)));
    }
    wake_read_ = net::Fd(pipe_fds[0]);
    wake_write_ = net::Fd(pipe_fds[1]);
    thread_ = std::thread([this] { run(); });
  }

  ~Loop() {
    const char byte = 0;
    [[maybe_unused]] const auto n = ::write(wake_write_.get(), &byte, 1);
    thread_.join();
  }

  int port() const { return port_; }
  std::size_t open_connections() const { return open_.load(); }

 private:
  void run() {
    std::vector<pollfd> fds;
    std::vector<Connection*> owners;
    for (;;) {
      fds.clear();
      owners.clear();
      fds.push_back({wake_read_.get(), POLLIN, 0});
      owners.push_back(nullptr);
      fds.push_back({listener_.get(), static_cast<short>(connections_.size() < kMaxConnections ? POLLIN : 0), 0});
      owners.push_back(nullptr);
      for (Connection& c : connections_) {
        short events = 0;
        if (!c.out.empty()) {
          events = POLLOUT;
        } else if (!c.parked) {
          events = POLLIN;
        } else {
          // Not read while parked, but a client that closes its end (it died, or gave up) must
          // not hold its slot until the request's timeout: a client never half-closes otherwise.
          events = POLLRDHUP;
        }
        fds.push_back({c.fd.get(), events, 0});
        owners.push_back(&c);
      }
      const int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
      if (n < 0 && errno != EINTR) return;  // cannot happen with valid fds; nothing left to serve
      if (fds[0].revents != 0) return;      // the destructor asks us to stop
      if (fds[1].revents & POLLIN) accept_all();
      for (std::size_t i = 2; i < fds.size(); ++i) {
        Connection& c = *owners[i];
        if (fds[i].revents & (POLLERR | POLLNVAL)) {
          c.dead = true;
          continue;
        }
        if (c.parked && (fds[i].revents & (POLLRDHUP | POLLHUP))) {
          c.dead = true;
          continue;
        }
        if (fds[i].revents & POLLOUT) write_some(c);
        if (fds[i].revents & (POLLIN | POLLHUP)) read_some(c);
      }
      expire(Clock::now());
      connections_.remove_if([](const Connection& c) { return c.dead; });
      open_.store(connections_.size());
    }
  }

  int poll_timeout_ms() const {
    Clock::time_point next = Clock::time_point::max();
    for (const Connection& c : connections_) {
      if (c.parked) next = std::min(next, c.parked->deadline);
      if (!c.said_hello && !c.close_after_reply) next = std::min(next, c.hello_deadline);
    }
    if (next == Clock::time_point::max()) return -1;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count() + 1;
    return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60'000));
  }

  void accept_all() {
    while (connections_.size() < kMaxConnections) {
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a connection that died before we took it
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Connection& c = connections_.emplace_back();
      c.fd = net::Fd(fd);
      c.hello_deadline = Clock::now() + hello_within_;
    }
  }

  /// Reads at most up to the end of the current frame, so one request is handled at a time.
  void read_some(Connection& c) {
    std::size_t want = wire::kHeader;
    if (c.in.size() >= wire::kHeader) want = wire::kHeader + wire::frame_length(c.in.data()).length;
    const std::size_t before = c.in.size();
    c.in.resize(want);
    const ssize_t got = ::recv(c.fd.get(), c.in.data() + before, want - before, 0);
    if (got <= 0) {
      c.in.resize(before);
      if (got == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) c.dead = true;
      return;
    }
    c.in.resize(before + static_cast<std::size_t>(got));
    if (c.in.size() == wire::kHeader) {
      const wire::FrameLength f = wire::frame_length(c.in.data());
      if (!f.error.empty()) return reject(c, "the store received " + f.error);
      if (!c.said_hello && f.length > kHelloFrame) {
        return reject(c, fmt::format("the first message must be a HELLO of at most {} bytes, not {} bytes", kHelloFrame,
                                     f.length));
      }
      return;
    }
    if (c.in.size() < want) return;
    const wire::Decoded d = wire::decode_request(c.in.data() + wire::kHeader, c.in.size() - wire::kHeader);
    c.in.clear();
    if (!d.request) return reject(c, "malformed request: " + d.error);
    handle(c, *d.request);
  }

  void write_some(Connection& c) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_at, c.out.size() - c.out_at, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
      return;
    }
    c.out_at += static_cast<std::size_t>(n);
    if (c.out_at == c.out.size()) {
      c.out.clear();
      c.out_at = 0;
      if (c.close_after_reply) c.dead = true;
    }
  }

  void reply(Connection& c, const wire::Reply& r) {
    c.out = wire::encode(r);
    c.out_at = 0;
    write_some(c);  // most replies fit the socket buffer at once
  }

  /// Sends an ERROR and closes the connection once it is out.
  void reject(Connection& c, const std::string& why) {
    c.in.clear();
    c.close_after_reply = true;
    wire::Reply r;
    r.status = wire::Status::error;
    r.message = why;
    reply(c, r);
  }

  void handle(Connection& c, const wire::Request& q) {
    if (!c.said_hello) {
      if (q.op != wire::Op::hello) return reject(c, "the first message must be HELLO");
      if (q.version != wire::kVersion) {
        return reject(c, fmt::format("the client speaks store protocol version {}, this server version {} "
                                     "(are all ranks the same Kiln build?)",
                                     q.version, wire::kVersion));
      }
      c.said_hello = true;
      return reply(c, {});
    }
    switch (q.op) {
      case wire::Op::hello:
        return reject(c, "HELLO sent twice");
      case wire::Op::set:
        return set(c, q.keys[0], q.value);
      case wire::Op::add:
        return add(c, q.keys[0], q.delta);
      case wire::Op::get:
      case wire::Op::wait: {
        Parked p{q.op, q.keys, Clock::now() + std::chrono::milliseconds(std::min(q.timeout_ms, kMaxTimeoutMs))};
        if (!answer_if_ready(c, p)) c.parked = std::move(p);
        return;
      }
    }
  }

  void set(Connection& c, const std::string& key, const std::vector<std::uint8_t>& value) {
    const auto it = values_.find(key);
    const std::size_t old_size = it == values_.end() ? 0 : it->first.size() + it->second.size();
    const std::size_t new_total = stored_bytes_ - old_size + key.size() + value.size();
    if (new_total > kMaxStoredBytes) {
      wire::Reply r;
      r.status = wire::Status::error;
      r.message = fmt::format("the rendezvous store is full ({} bytes at most); SET of '{}' refused", kMaxStoredBytes, key);
      return reply(c, r);
    }
    values_[key] = value;
    stored_bytes_ = new_total;
    reply(c, {});
    wake_parked();
  }

  void add(Connection& c, const std::string& key, std::int64_t delta) {
    wire::Reply r;
    try {
      auto& bytes = values_[key];
      const std::size_t old_size = bytes.size();
      r.integer = detail::parse_counter(bytes, key, "the TCP store") + delta;
      bytes = detail::format_counter(r.integer);
      stored_bytes_ += bytes.size() + (old_size == 0 ? key.size() : 0) - old_size;
      r.status = wire::Status::integer;
    } catch (const CommError& e) {
      r.status = wire::Status::error;
      r.message = e.what();
    }
    reply(c, r);
    wake_parked();
  }

  /// Replies to a GET/WAIT whose keys are all present; false if some are still missing.
  bool answer_if_ready(Connection& c, const Parked& p) {
    for (const auto& key : p.keys) {
      if (!values_.contains(key)) return false;
    }
    wire::Reply r;
    if (p.op == wire::Op::get) {
      r.status = wire::Status::value;
      r.value = values_.at(p.keys[0]);
    }
    reply(c, r);
    return true;
  }

  void wake_parked() {
    for (Connection& c : connections_) {
      if (c.parked && answer_if_ready(c, *c.parked)) c.parked.reset();
    }
  }

  void expire(Clock::time_point now) {
    for (Connection& c : connections_) {
      if (!c.said_hello && now >= c.hello_deadline && !c.close_after_reply) {
        reject(c, fmt::format("no HELLO within {} ms", hello_within_.count()));
      }
      if (c.parked && now >= c.parked->deadline) {
        wire::Reply r;
        r.status = wire::Status::timeout;
        for (const auto& key : c.parked->keys) {
          if (!values_.contains(key)) r.missing.push_back(key);
        }
        c.parked.reset();
        reply(c, r);
      }
    }
  }

  std::chrono::milliseconds hello_within_;
  net::Fd listener_;
  net::Fd wake_read_;
  net::Fd wake_write_;
  int port_ = 0;
  std::list<Connection> connections_;
  std::map<std::string, std::vector<std::uint8_t>> values_;
  std::size_t stored_bytes_ = 0;
  std::atomic<std::size_t> open_{0};
  std::thread thread_;
};

TcpStoreServer::TcpStoreServer(int port, std::chrono::milliseconds hello_within)
    : loop_(std::make_unique<Loop>(port, hello_within)) {}
TcpStoreServer::~TcpStoreServer() = default;
int TcpStoreServer::port() const noexcept { return loop_->port(); }
std::size_t TcpStoreServer::open_connections() const noexcept { return loop_->open_connections(); }

}  // namespace kiln::dist
