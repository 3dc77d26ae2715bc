// The TCP rendezvous store: its wire format byte by byte, the store across threads (one
// TcpStore per rank, rank 0 serving, and one store shared by threads), timeouts that name the
// missing ranks, and the failure paths: garbage and oversized input from a hostile client,
// clients that vanish mid-request, rank 0 dying under a waiting client, nobody listening, a
// port already in use; a client retrying to reach rank 0 says so every report interval. Also the
// tcp:// spec and the rendezvous launchers imply.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>
#include <thread>

#include "../../core/dist/tcp_wire.hpp"
#include "comm_fixture.hpp"
#include "kiln/dist/launcher_rendezvous.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/dist/tcp_store.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

namespace wire = dist::wire;
using std::chrono::milliseconds;

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

dist::TcpStoreOptions options(int rank, int world, int port, bool serve = false) {
  dist::TcpStoreOptions o;
  o.hosts = {"127.0.0.1"};
  o.port = port;
  o.rank = rank;
  o.world_size = world;
  o.serve = serve;
  o.connect_timeout = milliseconds(20000);
  return o;
}

/// A plain TCP connection to the store's port, for speaking (or not speaking) the protocol by hand.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{20, 0};  // no test may hang on a silent server
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawClient() { close(); }
  bool connected() const { return connected_; }
  void send(const std::vector<std::uint8_t>& b) {
    [[maybe_unused]] const auto n = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
  }
  void send(const std::string& s) { send(bytes(s)); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  /// Everything the server sends until it closes the connection (or 20 s pass).
  std::string read_until_closed() {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  /// One reply frame.
  wire::Reply read_reply() {
    std::uint8_t header[4];
    read_exact(header, 4);
    const auto f = wire::frame_length(header);
    std::vector<std::uint8_t> body(f.length);
    read_exact(body.data(), body.size());
    auto d = wire::decode_reply(body.data(), body.size());
    if (!d.reply) throw std::runtime_error("bad reply: " + d.error);
    return *d.reply;
  }

 private:
  void read_exact(std::uint8_t* p, std::size_t n) {
    for (std::size_t got = 0; got < n;) {
      const ssize_t k = ::recv(fd_, p + got, n - got, 0);
      if (k <= 0) throw std::runtime_error("connection closed");
      got += static_cast<std::size_t>(k);
    }
  }
  int fd_;
  bool connected_ = false;
};

wire::Request hello() {
  wire::Request q;
  q.op = wire::Op::hello;
  q.version = wire::kVersion;
  q.rank = 1;
  return q;
}

/// The ERROR message inside a reply frame the server sent before closing ("" if none).
std::string error_message(const std::string& frame) {
  if (frame.size() < 4) return "";
  const auto* p = reinterpret_cast<const std::uint8_t*>(frame.data());
  const auto d = wire::decode_reply(p + 4, frame.size() - 4);
  return d.reply && d.reply->status == wire::Status::error ? d.reply->message : "";
}

/// A store that still works: another client can set and read back a key.
void still_serves(int port) {
  dist::TcpStore client(options(1, 2, port));
  client.set("alive", bytes("yes"));
  BOOST_TEST(text(client.get("alive", milliseconds(5000))) == "yes");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tcp_store)

BOOST_AUTO_TEST_CASE(wire_round_trip) {
  wire::Request set;
  set.op = wire::Op::set;
  set.keys = {"gloo/rank3"};
  set.value = bytes(std::string("a\0b", 3));
  const auto frame = wire::encode(set);
  // u32 length, op 2, u32 key length 10, key, u32 value length 3, value.
  BOOST_TEST(frame.size() == 4u + 1 + 4 + 10 + 4 + 3);
  BOOST_TEST(wire::frame_length(frame.data()).length == frame.size() - 4);
  BOOST_TEST(frame[4] == 2);
  const auto d = wire::decode_request(frame.data() + 4, frame.size() - 4);
  BOOST_TEST_REQUIRE(d.request.has_value(), d.error);
  BOOST_TEST(d.request->keys == std::vector<std::string>{"gloo/rank3"});
  BOOST_TEST(d.request->value == set.value);

  wire::Request wait;
  wait.op = wire::Op::wait;
  wait.keys = {"a", "", "ccc"};
  wait.timeout_ms = 0x0102030405ull;
  const auto wf = wire::encode(wait);
  const auto wd = wire::decode_request(wf.data() + 4, wf.size() - 4);
  BOOST_TEST_REQUIRE(wd.request.has_value(), wd.error);
  BOOST_TEST(wd.request->keys == wait.keys);
  BOOST_TEST(wd.request->timeout_ms == 0x0102030405ull);

  wire::Request add;
  add.op = wire::Op::add;
  add.keys = {"n"};
  add.delta = -7;
  const auto af = wire::encode(add);
  BOOST_TEST(wire::decode_request(af.data() + 4, af.size() - 4).request->delta == -7);

  const auto hf = wire::encode(hello());
  const auto hd = wire::decode_request(hf.data() + 4, hf.size() - 4);
  BOOST_TEST_REQUIRE(hd.request.has_value(), hd.error);
  BOOST_TEST(hd.request->version == wire::kVersion);
  BOOST_TEST(hd.request->rank == 1u);

  wire::Reply timeout;
  timeout.status = wire::Status::timeout;
  timeout.missing = {"x/rank1", "x/rank2"};
  const auto tf = wire::encode(timeout);
  const auto td = wire::decode_reply(tf.data() + 4, tf.size() - 4);
  BOOST_TEST_REQUIRE(td.reply.has_value(), td.error);
  BOOST_TEST(td.reply->missing == timeout.missing);
  wire::Reply integer;
  integer.status = wire::Status::integer;
  integer.integer = -123456789012345;
  const auto itf = wire::encode(integer);
  BOOST_TEST(wire::decode_reply(itf.data() + 4, itf.size() - 4).reply->integer == -123456789012345);
}

BOOST_AUTO_TEST_CASE(wire_rejects_malformed_input) {
  const std::uint8_t zero[4] = {0, 0, 0, 0};
  BOOST_TEST(wire::frame_length(zero).error == "an empty message (length 0)");
  const std::uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
  BOOST_TEST(contains(wire::frame_length(huge).error, "a message of 4294967295 bytes, over the limit of"));

  const auto decode = [](const std::vector<std::uint8_t>& body) {
    return wire::decode_request(body.data(), body.size()).error;
  };
  BOOST_TEST(decode({9}) == "unknown opcode 9");
  BOOST_TEST(decode({2, 0, 0, 0, 5, 'a'}) == "key of 5 bytes runs past the end of a 6-byte message");
  BOOST_TEST(decode({2, 0, 0, 0x10, 0x01}) == "key of 4097 bytes is over the limit of 4096 bytes");
  BOOST_TEST(decode({3, 0, 0, 0, 1, 'k', 0, 0}) == "timeout runs past the end of a 8-byte message");
  BOOST_TEST(decode({4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 99}) == "1 bytes left over after the last field");
  BOOST_TEST(decode({5, 0xff, 0xff, 0xff, 0xff}) == "key count 4294967295 cannot fit in a message");
  BOOST_TEST(contains(decode({1, 'N', 'O', 'T', 'K', 'I', 'L', 'N', '!'}), "without the KILNSTOR magic"));

  wire::Request big;
  big.op = wire::Op::set;
  big.keys = {"k"};
  big.value.resize(wire::kMaxValue + 1);
  const auto msg = error_text<CommError>([&] { wire::encode(big); });
  BOOST_TEST(msg == "a rendezvous store value of 1048577 bytes is over the limit of 1048576 bytes");
}

BOOST_AUTO_TEST_CASE(ranks_exchange_and_add_over_tcp) {
  constexpr int kWorld = 6;
  dist::TcpStore rank0(options(0, kWorld, 0, true));
  const int port = rank0.port();
  BOOST_TEST(port > 0);
  BOOST_TEST(rank0.endpoint() == "tcp://127.0.0.1:" + std::to_string(port));
  std::vector<std::string> got(kWorld * kWorld);
  std::vector<std::int64_t> last(kWorld);
  const auto errors = run_ranks(kWorld, [&](int r) {
    std::unique_ptr<dist::TcpStore> own;
    if (r != 0) own = std::make_unique<dist::TcpStore>(options(r, kWorld, port));
    dist::TcpStore& store = r == 0 ? rank0 : *own;
    store.set("ex/rank" + std::to_string(r), bytes("hello from " + std::to_string(r)));
    for (int p = 0; p < kWorld; ++p) got[r * kWorld + p] = text(store.get("ex/rank" + std::to_string(p), milliseconds(20000)));
    for (int k = 0; k < 50; ++k) last[r] = store.add("counter", 1);
    std::vector<std::string> all;
    for (int p = 0; p < kWorld; ++p) all.push_back("ex/rank" + std::to_string(p));
    store.wait(all, milliseconds(20000));
  });
  for (int r = 0; r < kWorld; ++r) {
    BOOST_TEST(errors[r] == "");
    for (int p = 0; p < kWorld; ++p) BOOST_TEST(got[r * kWorld + p] == "hello from " + std::to_string(p));
  }
  BOOST_TEST(*std::max_element(last.begin(), last.end()) == 50 * kWorld);
  BOOST_TEST(text(rank0.get("counter", milliseconds(0))) == std::to_string(50 * kWorld));
  rank0.set("counter", bytes("not a number"));
  const auto bad_add = error_text<CommError>([&] { rank0.add("counter", 1); });
  BOOST_TEST(contains(bad_add, "ADD 'counter' failed at tcp://127.0.0.1:"), bad_add);
  BOOST_TEST(contains(bad_add, "holds 12 bytes that are not a decimal integer"), bad_add);
  // Values up to the limit travel whole, binary included.
  std::vector<std::uint8_t> big(wire::kMaxValue);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 7);
  rank0.set("big", big);
  dist::TcpStore other(options(1, kWorld, port));
  BOOST_TEST((other.get("big", milliseconds(5000)) == big));
}

BOOST_AUTO_TEST_CASE(one_store_shared_by_threads_does_not_serialise_waits) {
  // A thread parked in get() must not stop another thread of the same process from setting
  // the key it waits for: each call takes its own connection.
  dist::TcpStore rank0(options(0, 2, 0, true));
  dist::TcpStore client(options(1, 2, rank0.port()));
  std::string seen;
  std::thread waiter([&] { seen = text(client.get("late", milliseconds(20000))); });
  std::this_thread::sleep_for(milliseconds(50));
  client.set("late", bytes("here"));
  waiter.join();
  BOOST_TEST(seen == "here");
}

BOOST_AUTO_TEST_CASE(timeout_names_missing_ranks) {
  dist::TcpStore rank0(options(0, 8, 0, true));
  dist::TcpStore client(options(2, 8, rank0.port()));
  std::vector<std::string> keys;
  for (int r = 0; r < 8; ++r) {
    keys.push_back("gloo/rank" + std::to_string(r));
    if (r != 3 && r != 5) rank0.set(keys.back(), bytes("x"));
  }
  const auto msg = error_text<CommError>([&] { client.wait(keys, milliseconds(100)); });
  BOOST_TEST(contains(msg, "rendezvous timed out after 0.1 s waiting for ranks 3, 5 of 8 (missing keys: gloo/rank3, "
                           "gloo/rank5 in TCP store tcp://127.0.0.1:" + std::to_string(rank0.port()) + ")"), msg);
  const auto one = error_text<CommError>([&] { client.get("nobody/sets/this", milliseconds(50)); });
  BOOST_TEST(contains(one, "waiting for 1 key (missing keys: nobody/sets/this in TCP store"), one);
  // The connection is still in step after a timeout.
  BOOST_TEST(text(client.get("gloo/rank0", milliseconds(1000))) == "x");
}

BOOST_AUTO_TEST_CASE(garbage_clients_get_an_error_and_the_store_survives) {
  dist::TcpStore rank0(options(0, 2, 0, true));
  const int port = rank0.port();
  {  // An HTTP request: not a frame the server accepts as a first message.
    RawClient http(port);
    BOOST_TEST_REQUIRE(http.connected());
    http.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string reply = http.read_until_closed();  // returns: the server closed it
    BOOST_TEST(contains(error_message(reply), "the store received a message of"), error_message(reply));
  }
  {  // A length prefix of 4 GiB: refused from the header alone, nothing allocated.
    RawClient huge(port);
    huge.send(std::vector<std::uint8_t>{0xff, 0xff, 0xff, 0xff});
    BOOST_TEST(contains(error_message(huge.read_until_closed()), "over the limit"));
  }
  {  // A well-formed but oversized HELLO, then a request before HELLO, then a wrong version.
    RawClient big(port);
    big.send(std::vector<std::uint8_t>{0, 0, 1, 0, 1});
    BOOST_TEST(contains(error_message(big.read_until_closed()), "the first message must be a HELLO of at most 64 bytes"));
    RawClient early(port);
    wire::Request set;
    set.op = wire::Op::set;
    set.keys = {"k"};
    early.send(wire::encode(set));
    BOOST_TEST(error_message(early.read_until_closed()) == "the first message must be HELLO");
    RawClient old(port);
    wire::Request h = hello();
    h.version = 99;
    old.send(wire::encode(h));
    BOOST_TEST(contains(error_message(old.read_until_closed()), "protocol version 99, this server version 1"));
  }
  {  // After a valid HELLO: a value over the limit announced in the header, then random bytes.
    RawClient rude(port);
    rude.send(wire::encode(hello()));
    BOOST_TEST((rude.read_reply().status == wire::Status::ok));
    rude.send(std::vector<std::uint8_t>{0x00, 0x20, 0x00, 0x00});  // 2 MiB body
    BOOST_TEST(contains(error_message(rude.read_until_closed()), "over the limit of"));
    RawClient noise(port);
    noise.send(wire::encode(hello()));
    noise.read_reply();
    noise.send(std::vector<std::uint8_t>{0, 0, 0, 3, 7, 7, 7});
    BOOST_TEST(error_message(noise.read_until_closed()) == "malformed request: unknown opcode 7");
  }
  {  // Many idle connections that never speak hold slots but do not block real clients.
    std::vector<std::unique_ptr<RawClient>> idle;
    for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<RawClient>(port));
    still_serves(port);
  }
  still_serves(port);
}

BOOST_AUTO_TEST_CASE(silent_connections_are_dropped_after_the_hello_window) {
  dist::TcpStoreServer server(0, milliseconds(200));
  RawClient silent(server.port());
  BOOST_TEST_REQUIRE(silent.connected());
  // read_until_closed() returns once the server hangs up (its own limit is 20 s).
  BOOST_TEST(error_message(silent.read_until_closed()) == "no HELLO within 200 ms");
  RawClient talker(server.port());
  talker.send(wire::encode(hello()));
  BOOST_TEST((talker.read_reply().status == wire::Status::ok));  // a client that says HELLO is served
}

BOOST_AUTO_TEST_CASE(client_that_disconnects_mid_request_is_forgotten) {
  dist::TcpStore rank0(options(0, 2, 0, true));
  const int port = rank0.port();
  {  // Parks a WAIT, then vanishes.
    RawClient quitter(port);
    quitter.send(wire::encode(hello()));
    quitter.read_reply();
    wire::Request w;
    w.op = wire::Op::wait;
    w.keys = {"never"};
    w.timeout_ms = 60000;
    quitter.send(wire::encode(w));
  }
  {  // Sends half a frame, then vanishes.
    RawClient half(port);
    half.send(wire::encode(hello()));
    half.read_reply();
    auto frame = wire::encode(hello());
    frame.resize(frame.size() / 2);
    half.send(frame);
  }
  // Both connections are dropped as soon as their clients close, not when the WAIT's 60 s
  // timeout passes (the bound below only keeps a broken server from hanging the test).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (rank0.server()->open_connections() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  BOOST_TEST(rank0.server()->open_connections() == 0u);
  still_serves(port);
  rank0.set("never", bytes("now"));  // wakes nobody: the parked request left with its client
  still_serves(port);
}

BOOST_AUTO_TEST_CASE(rank0_dying_fails_waiting_clients_at_once) {
  auto rank0 = std::make_unique<dist::TcpStore>(options(0, 3, 0, true));
  dist::TcpStore client(options(1, 3, rank0->port()));
  client.set("warm", bytes("up"));  // connected
  std::string error;
  std::thread waiter([&] {
    try {
      client.get("gloo/rank2", milliseconds(600000));  // ten minutes: only the closed socket can end it
    } catch (const CommError& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(100));
  rank0.reset();  // rank 0 goes away with its server
  waiter.join();
  BOOST_TEST(contains(error, "rank 1 of 3 lost its connection to the rendezvous store tcp://127.0.0.1:"), error);
  BOOST_TEST(contains(error, "(served by rank 0) during GET 'gloo/rank2'"), error);
  BOOST_TEST(contains(error, "rank 0 has probably exited"), error);
}

BOOST_AUTO_TEST_CASE(nobody_listening_is_a_clear_error_after_the_timeout) {
  int port = 0;
  {
    dist::TcpStoreServer probe(0);  // a port that was free a moment ago and is closed again
    port = probe.port();
  }
  dist::TcpStoreOptions o = options(3, 4, port);
  o.connect_timeout = milliseconds(300);
  dist::TcpStore client(o);
  const auto msg = error_text<CommError>([&] { client.set("k", bytes("v")); });
  BOOST_TEST(contains(msg, "rank 3 of 4 could not reach the rendezvous store tcp://127.0.0.1:" + std::to_string(port) +
                               " (served by rank 0) within 0.3 s: Connection refused"),
             msg);
  BOOST_TEST(contains(msg, "check that rank 0 was started and is still alive"), msg);
}

BOOST_AUTO_TEST_CASE(a_client_that_cannot_reach_rank0_says_so_while_it_retries) {
  int port = 0;
  {
    dist::TcpStoreServer probe(0);
    port = probe.port();
  }
  dist::TcpStoreOptions o = options(3, 4, port);
  o.connect_timeout = milliseconds(1000);
  std::vector<std::string> reports;
  o.connect_report = {milliseconds(100), [&](const std::string& m) { reports.push_back(m); }};
  dist::TcpStore client(o);
  const auto msg = error_text<CommError>([&] { client.set("k", bytes("v")); });
  BOOST_TEST(contains(msg, "could not reach the rendezvous store"), msg);
  // Retries back off from 20 ms to 1 s, so a report comes at the first retry after 100 ms at the
  // latest; at most one per 100 ms.
  BOOST_TEST_REQUIRE(!reports.empty());
  BOOST_TEST(reports.size() <= 10u);
  BOOST_TEST(contains(reports[0], "rank 3 of 4 has tried for "), reports[0]);
  BOOST_TEST(contains(reports[0], " to reach the rendezvous store tcp://127.0.0.1:" + std::to_string(port) +
                                      " (served by rank 0): Connection refused"),
             reports[0]);
  BOOST_TEST(contains(reports[0], "it gives up after 1 s (dist.timeout_s)"), reports[0]);
}

BOOST_AUTO_TEST_CASE(a_foreign_server_on_the_port_is_named) {
  // Something that is not a Kiln store (here: an HTTP-ish responder) holds the port.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_TEST_REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  BOOST_TEST_REQUIRE(::listen(listener, 8) == 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  std::thread responder([listener] {
    const int c = ::accept(listener, nullptr, nullptr);  // answers the first connection, then stops
    if (c < 0) return;
    const std::string reply = "HTTP/1.1 400 Bad Request\r\n\r\n";
    [[maybe_unused]] const auto n = ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
    ::close(c);
  });
  dist::TcpStoreOptions o = options(1, 2, port);
  dist::TcpStore client(o);
  const auto msg = error_text<CommError>([&] { client.set("k", bytes("v")); });
  responder.join();
  ::close(listener);
  // Named at the first answer, without waiting out the connect timeout: retrying cannot help.
  BOOST_TEST(msg == "rank 1 of 2: the rendezvous store at 127.0.0.1:" + std::to_string(port) +
                        " answered with a message of 1213486160 bytes, over the limit of 1114112 bytes; is something "
                        "other than a Kiln rank listening on that port?",
             msg);
}

BOOST_AUTO_TEST_CASE(port_in_use_is_named) {
  dist::TcpStore first(options(0, 2, 0, true));
  const auto msg = error_text<CommError>([&] { dist::TcpStore second(options(0, 2, first.port(), true)); });
  BOOST_TEST(contains(msg, "rank 0 cannot serve the rendezvous store on port " + std::to_string(first.port()) +
                               ": Address already in use"),
             msg);
}

BOOST_AUTO_TEST_CASE(make_store_tcp_specs) {
  RankInfo r0;
  r0.world_size = 2;
  int port = 0;
  {
    dist::TcpStoreServer probe(0);  // a port that is free again once the probe is gone
    port = probe.port();
  }
  const std::string spec = "tcp://127.0.0.1:" + std::to_string(port);
  auto store = dist::make_store(spec, r0);  // rank 0 serves
  BOOST_TEST(dynamic_cast<dist::TcpStore*>(store.get()) != nullptr);
  BOOST_TEST(dist::describe_store(*store) == spec);
  still_serves(port);
  const auto bad = [&](const std::string& spec) {
    RankInfo r1 = r0;
    r1.rank = 1;
    return error_text<ConfigError>([&] { dist::make_store(spec, r1); });
  };
  BOOST_TEST(contains(bad("tcp://node01"), "rendezvous 'tcp://node01': no port; write tcp://<host>:<port>"));
  BOOST_TEST(contains(bad("tcp://:29500"), "no host"));
  BOOST_TEST(contains(bad("tcp://node01:http"), "port 'http' is not a number in 1..65535"));
  BOOST_TEST(contains(bad("tcp://node01:70000"), "port '70000' is not a number in 1..65535"));
  BOOST_TEST(contains(bad("tcp://node01:0"), "port '0' is not a number in 1..65535"));
  BOOST_TEST(contains(bad("tcp://[::1]:29500"), "IPv6 addresses are not supported"));
}

BOOST_AUTO_TEST_CASE(launchers_imply_a_rendezvous) {
  using Env = std::map<std::string, std::string>;
  const auto choose = [](const Env& env) {
    const launch::EnvLookup lookup = [env](const std::string& n) -> std::optional<std::string> {
      const auto it = env.find(n);
      return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    return dist::launcher_rendezvous(launch::resolve_ranks({}, lookup), lookup);
  };
  const Env torchrun = {{"RANK", "1"},          {"WORLD_SIZE", "4"},          {"TORCHELASTIC_RUN_ID", "j"},
                        {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}};
  auto c = choose(torchrun);
  BOOST_TEST_REQUIRE(c.has_value());
  BOOST_TEST(c->spec == "tcp://node0:29500");
  BOOST_TEST(c->from == "MASTER_ADDR and MASTER_PORT");
  Env agent = torchrun;
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  c = choose(agent);
  BOOST_TEST(c->spec == "tcp://node0:29501");
  BOOST_TEST(c->from == "MASTER_ADDR and MASTER_PORT + 1: torchrun's agent store holds MASTER_PORT");
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  BOOST_TEST(choose(agent)->spec == "tcp://node0:29500");
  Env by_hand = torchrun;
  by_hand.erase("TORCHELASTIC_RUN_ID");
  BOOST_TEST(choose(by_hand)->spec == "tcp://node0:29500");
  Env nproc = by_hand;
  nproc["KILN_LAUNCHER"] = "kiln --nproc";
  BOOST_TEST(!choose(nproc).has_value());  // the supervisor sets KILN_RENDEZVOUS itself
  Env no_master = torchrun;
  no_master.erase("MASTER_PORT");
  BOOST_TEST(!choose(no_master).has_value());
  Env one = torchrun;
  one["WORLD_SIZE"] = "1";
  one["RANK"] = "0";
  BOOST_TEST(!choose(one).has_value());
  const Env ompi = {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  BOOST_TEST(choose(ompi)->spec == "mpi");
  const Env slurm = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}};
  BOOST_TEST(!choose(slurm).has_value());
  Env bad_port = torchrun;
  bad_port["MASTER_PORT"] = "port";
  BOOST_TEST(error_text<ConfigError>([&] { choose(bad_port); }) ==
             "environment variable MASTER_PORT='port' is not a port number (1..65535)");
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  agent["MASTER_PORT"] = "65535";
  BOOST_TEST(contains(error_text<ConfigError>([&] { choose(agent); }), "leaves no port for Kiln's store"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
