// TcpStore's client side (see kiln/dist/tcp_store.hpp; frames in tcp_wire.hpp).
#include "kiln/dist/tcp_store.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "kiln/errors.hpp"
#include "missing_keys.hpp"
#include "socket_io.hpp"
#include "tcp_wire.hpp"

namespace kiln::dist {

using net::Clock;

namespace {

std::string seconds(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{:.3g} s", static_cast<double>(d.count()) / 1000.0);
}

wire::Reply decode(const std::vector<std::uint8_t>& body, const std::string& endpoint) {
  wire::DecodedReply d = wire::decode_reply(body.data(), body.size());
  if (!d.reply) {
    throw CommError(fmt::format("the rendezvous store {} sent a malformed reply ({}); is something other "
                                "than a Kiln rank listening on that port?",
                                endpoint, d.error));
  }
  return *std::move(d.reply);
}

/// Sends `frame` and reads one reply frame's body into `body`, all before `deadline`. A reply
/// length outside the limits means `peer` is not a Kiln store: CommError, as retrying is futile.
net::IoResult exchange(int fd, const std::vector<std::uint8_t>& frame, Clock::time_point deadline,
                       std::vector<std::uint8_t>& body, std::string& error, const std::string& who,
                       const std::string& peer) {
  net::IoResult io = net::send_all(fd, frame, deadline, error);
  std::uint8_t header[wire::kHeader];
  if (io == net::IoResult::ok) io = net::recv_exact(fd, header, sizeof header, deadline, error);
  if (io != net::IoResult::ok) return io;
  const wire::FrameLength f = wire::frame_length(header);
  if (!f.error.empty()) {
    throw CommError(fmt::format("{}: the rendezvous store at {} answered with {}; is something other than a Kiln "
                                "rank listening on that port?",
                                who, peer, f.error));
  }
  body.resize(f.length);
  return net::recv_exact(fd, body.data(), body.size(), deadline, error);
}

/// The error for a reply that is not the expected one: the server's ERROR text, or a protocol slip.
[[noreturn]] void unexpected(const wire::Reply& r, const std::string& who, const std::string& what,
                             const std::string& endpoint) {
  if (r.status == wire::Status::error) throw CommError(fmt::format("{}: {} failed at {}: {}", who, what, endpoint, r.message));
  throw CommError(fmt::format("{}: {} got an unexpected reply (status {}) from {}", who, what,
                              static_cast<int>(r.status), endpoint));
}

}  // namespace

TcpStore::TcpStore(TcpStoreOptions options) : options_(std::move(options)) {
  if (options_.hosts.empty()) throw ConfigError("a TCP rendezvous store needs a host to reach rank 0 at");
  if (options_.serve) {
    server_ = std::make_unique<TcpStoreServer>(options_.port);
    port_ = server_->port();
  } else {
    if (options_.port < 1 || options_.port > 65535) {
      throw ConfigError(fmt::format("TCP rendezvous port {} is not in 1..65535", options_.port));
    }
    port_ = options_.port;
  }
}

TcpStore::~TcpStore() {
  for (const int fd : idle_) ::close(fd);
  // server_ (if any) stops after the client connections are closed.
}

std::string TcpStore::endpoint() const { return fmt::format("tcp://{}:{}", options_.hosts.front(), port_); }

std::string TcpStore::who() const {
  if (options_.world_size > 0) return fmt::format("rank {} of {}", options_.rank, options_.world_size);
  return fmt::format("rank {}", options_.rank);
}

int TcpStore::take_connection() {
  {
    std::lock_guard lock(pool_mutex_);
    if (!idle_.empty()) {
      const int fd = idle_.back();
      idle_.pop_back();
      return fd;
    }
  }
  // Rank 0 reaches its own server over loopback: it listens on every interface.
  const std::vector<std::string> hosts = options_.serve ? std::vector<std::string>{"127.0.0.1"} : options_.hosts;
  const auto start = Clock::now();
  const auto deadline = start + options_.connect_timeout;
  auto next_report = start + options_.connect_report.every;
  auto pause = std::chrono::milliseconds(20);
  std::string last_error = "no attempt made";
  std::string last_address = endpoint();
  for (;;) {
    for (const std::string& host : hosts) {
      std::string error;
      const auto addrs = net::resolve_ipv4(host, port_, error);
      if (addrs.empty()) {
        last_error = error;
        last_address = host;
        continue;
      }
      for (const sockaddr_in& addr : addrs) {
        // One attempt may take at most 2 s, so an unroutable address does not starve the others.
        const auto attempt = std::min(deadline, Clock::now() + std::chrono::seconds(2));
        net::Fd fd = net::connect_once(addr, attempt, error);
        if (!fd) {
          last_error = error;
          last_address = net::to_string(addr);
          continue;
        }
        wire::Request hello;
        hello.op = wire::Op::hello;
        hello.version = wire::kVersion;
        hello.rank = static_cast<std::uint32_t>(options_.rank);
        std::vector<std::uint8_t> body;
        if (exchange(fd.get(), wire::encode(hello), attempt, body, error, who(), net::to_string(addr)) !=
            net::IoResult::ok) {
          last_error = "HELLO not answered: " + error;
          last_address = net::to_string(addr);
          continue;
        }
        const wire::Reply r = decode(body, net::to_string(addr));
        if (r.status == wire::Status::error) {
          throw CommError(fmt::format("{}: the rendezvous store {} refused the connection: {}", who(),
                                      net::to_string(addr), r.message));
        }
        return fd.release();
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (options_.connect_report.on() && now >= next_report) {
      options_.connect_report.say(fmt::format(
          "{} has tried for {} to reach the rendezvous store {} (served by rank 0): {} ({}); it gives up after {} "
          "({})",
          who(), seconds(std::chrono::round<std::chrono::seconds>(now - start)), endpoint(), last_error,
          last_address, seconds(options_.connect_timeout), options_.connect_report.timeout_from));
      next_report += options_.connect_report.every;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
  throw CommError(fmt::format(
      "{} could not reach the rendezvous store {} (served by rank 0) within {}: {} ({}); check that rank 0 "
      "was started and is still alive, that the host and port are right and reachable from this host "
      "(firewall), or raise dist.timeout_s",
      who(), endpoint(), seconds(options_.connect_timeout), last_error, last_address));
}

void TcpStore::give_back(int fd) {
  std::lock_guard lock(pool_mutex_);
  idle_.push_back(fd);
}

std::vector<std::uint8_t> TcpStore::round_trip(const std::vector<std::uint8_t>& frame, Clock::time_point reply_deadline,
                                               const std::string& what) {
  net::Fd fd(take_connection());
  std::string error;
  std::vector<std::uint8_t> body;
  const net::IoResult io = exchange(fd.get(), frame, reply_deadline, body, error, who(), endpoint());
  switch (io) {
    case net::IoResult::ok:
      give_back(fd.release());
      return body;
    case net::IoResult::closed:
      throw CommError(fmt::format("{} lost its connection to the rendezvous store {} (served by rank 0) during {}: "
                                  "{}; rank 0 has probably exited, see its log for why",
                                  who(), endpoint(), what, error));
    case net::IoResult::timed_out:
      throw CommError(fmt::format("{}: the rendezvous store {} (served by rank 0) did not answer {} in time; rank 0 "
                                  "may be hung, or its host unreachable",
                                  who(), endpoint(), what));
    case net::IoResult::failed:
      break;
  }
  throw CommError(fmt::format("{}: talking to the rendezvous store {} (served by rank 0) during {} failed: {}", who(),
                              endpoint(), what, error));
}

void TcpStore::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  wire::Request q;
  q.op = wire::Op::set;
  q.keys = {key};
  q.value = value;
  const std::string what = fmt::format("SET '{}'", key);
  const wire::Reply r = decode(round_trip(wire::encode(q), Clock::now() + options_.connect_timeout, what), endpoint());
  if (r.status != wire::Status::ok) unexpected(r, who(), what, endpoint());
}

std::vector<std::uint8_t> TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  wire::Request q;
  q.op = wire::Op::get;
  q.keys = {key};
  q.timeout_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
  const std::string what = fmt::format("GET '{}'", key);
  wire::Reply r = decode(round_trip(wire::encode(q), Clock::now() + timeout + kReplyGrace, what), endpoint());
  if (r.status == wire::Status::value) return std::move(r.value);
  if (r.status == wire::Status::timeout) {
    throw detail::StoreTimeout(r.missing.empty() ? std::vector<std::string>{key} : r.missing, timeout,
                               options_.world_size, fmt::format("TCP store {}", endpoint()));
  }
  unexpected(r, who(), what, endpoint());
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  wire::Request q;
  q.op = wire::Op::add;
  q.keys = {key};
  q.delta = delta;
  const std::string what = fmt::format("ADD '{}'", key);
  const wire::Reply r = decode(round_trip(wire::encode(q), Clock::now() + options_.connect_timeout, what), endpoint());
  if (r.status == wire::Status::integer) return r.integer;
  unexpected(r, who(), what, endpoint());
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  wire::Request q;
  q.op = wire::Op::wait;
  q.keys = keys;
  q.timeout_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
  const std::string what = fmt::format("WAIT for {} key{}", keys.size(), keys.size() == 1 ? "" : "s");
  const wire::Reply r = decode(round_trip(wire::encode(q), Clock::now() + timeout + kReplyGrace, what), endpoint());
  if (r.status == wire::Status::ok) return;
  if (r.status == wire::Status::timeout) {
    throw detail::StoreTimeout(r.missing, timeout, options_.world_size, fmt::format("TCP store {}", endpoint()));
  }
  unexpected(r, who(), what, endpoint());
}

}  // namespace kiln::dist
