// The TCP store's frames (see tcp_wire.hpp for the format).
#include "tcp_wire.hpp"

#include <fmt/format.h>

#include <cstring>

#include "kiln/errors.hpp"

namespace kiln::dist::wire {
namespace {

class Writer {
 public:
  Writer() { bytes_.resize(kHeader); }
  void u8(std::uint8_t v) { bytes_.push_back(v); }
  void u16(std::uint16_t v) { be(v, 2); }
  void u32(std::uint32_t v) { be(v, 4); }
  void u64(std::uint64_t v) { be(v, 8); }
  void raw(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void string(const void* data, std::size_t n, std::size_t limit, const char* what) {
    if (n > limit) {
      throw CommError(fmt::format("a rendezvous store {} of {} bytes is over the limit of {} bytes", what, n, limit));
    }
    u32(static_cast<std::uint32_t>(n));
    raw(data, n);
  }
  /// Fills in the length prefix and returns the frame.
  std::vector<std::uint8_t> finish() {
    const std::size_t body = bytes_.size() - kHeader;
    if (body > kMaxFrame) {
      throw CommError(fmt::format("a rendezvous store message of {} bytes is over the limit of {} bytes", body,
                                  kMaxFrame));
    }
    for (int i = 0; i < 4; ++i) bytes_[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(body >> (24 - 8 * i));
    return std::move(bytes_);
  }

 private:
  void be(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) bytes_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  std::vector<std::uint8_t> bytes_;
};

/// Reads fields from a body; every read checks the bounds and records the first problem.
class Reader {
 public:
  Reader(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  std::uint64_t be(int n, const char* field) {
    if (!ok()) return 0;
    if (n_ - at_ < static_cast<std::size_t>(n)) {
      fail(fmt::format("{} runs past the end of a {}-byte message", field, n_));
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p_[at_++];
    return v;
  }
  /// A length-prefixed string of at most `limit` bytes.
  std::string_view string(std::size_t limit, const char* field) {
    const std::uint64_t len = be(4, field);
    if (!ok()) return {};
    if (len > limit) {
      fail(fmt::format("{} of {} bytes is over the limit of {} bytes", field, len, limit));
      return {};
    }
    if (n_ - at_ < len) {
      fail(fmt::format("{} of {} bytes runs past the end of a {}-byte message", field, len, n_));
      return {};
    }
    std::string_view s(reinterpret_cast<const char*>(p_ + at_), static_cast<std::size_t>(len));
    at_ += static_cast<std::size_t>(len);
    return s;
  }
  void expect_end() {
    if (ok() && at_ != n_) fail(fmt::format("{} bytes left over after the last field", n_ - at_));
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t at_ = 0;
  std::string error_;
};

/// Keys in a WAIT request or a TIMEOUT reply: at most as many as could fit in a frame.
std::vector<std::string> read_keys(Reader& r) {
  const std::uint64_t count = r.be(4, "key count");
  std::vector<std::string> keys;
  if (!r.ok()) return keys;
  if (count > kMaxFrame / 4) {
    r.fail(fmt::format("key count {} cannot fit in a message", count));
    return keys;
  }
  for (std::uint64_t i = 0; i < count && r.ok(); ++i) keys.emplace_back(r.string(kMaxKey, "key"));
  return keys;
}

}  // namespace

std::vector<std::uint8_t> encode(const Request& q) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(q.op));
  const auto key = [&](std::size_t i) { w.string(q.keys.at(i).data(), q.keys.at(i).size(), kMaxKey, "key"); };
  switch (q.op) {
    case Op::hello:
      w.raw(kMagic.data(), kMagic.size());
      w.u16(q.version);
      w.u32(q.rank);
      break;
    case Op::set:
      key(0);
      w.string(q.value.data(), q.value.size(), kMaxValue, "value");
      break;
    case Op::get:
      key(0);
      w.u64(q.timeout_ms);
      break;
    case Op::add:
      key(0);
      w.u64(static_cast<std::uint64_t>(q.delta));
      break;
    case Op::wait:
      w.u32(static_cast<std::uint32_t>(q.keys.size()));
      for (std::size_t i = 0; i < q.keys.size(); ++i) key(i);
      w.u64(q.timeout_ms);
      break;
  }
  return w.finish();
}

std::vector<std::uint8_t> encode(const Reply& a) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(a.status));
  switch (a.status) {
    case Status::ok:
      break;
    case Status::value:
      w.string(a.value.data(), a.value.size(), kMaxValue, "value");
      break;
    case Status::integer:
      w.u64(static_cast<std::uint64_t>(a.integer));
      break;
    case Status::timeout:
      w.u32(static_cast<std::uint32_t>(a.missing.size()));
      for (const auto& k : a.missing) w.string(k.data(), k.size(), kMaxKey, "key");
      break;
    case Status::error: {
      // Server messages are ours, but cut them to a sane size all the same.
      const std::string m = a.message.substr(0, 4096);
      w.string(m.data(), m.size(), kMaxValue, "message");
      break;
    }
  }
  return w.finish();
}

FrameLength frame_length(const std::uint8_t* h) {
  const std::size_t n = (std::size_t{h[0]} << 24) | (std::size_t{h[1]} << 16) | (std::size_t{h[2]} << 8) | h[3];
  if (n == 0) return {0, "an empty message (length 0)"};
  if (n > kMaxFrame) return {n, fmt::format("a message of {} bytes, over the limit of {} bytes", n, kMaxFrame)};
  return {n, {}};
}

Decoded decode_request(const std::uint8_t* body, std::size_t size) {
  Reader r(body, size);
  Request q;
  const auto op = static_cast<std::uint8_t>(r.be(1, "opcode"));
  switch (op) {
    case static_cast<std::uint8_t>(Op::hello): {
      q.op = Op::hello;
      if (size < 1 + kMagic.size() || std::memcmp(body + 1, kMagic.data(), kMagic.size()) != 0) {
        return {std::nullopt, "a HELLO without the KILNSTOR magic (not a Kiln store client)"};
      }
      r.be(static_cast<int>(kMagic.size()), "magic");
      q.version = static_cast<std::uint16_t>(r.be(2, "version"));
      q.rank = static_cast<std::uint32_t>(r.be(4, "rank"));
      break;
    }
    case static_cast<std::uint8_t>(Op::set):
      q.op = Op::set;
      q.keys.emplace_back(r.string(kMaxKey, "key"));
      if (const auto v = r.string(kMaxValue, "value"); r.ok()) q.value.assign(v.begin(), v.end());
      break;
    case static_cast<std::uint8_t>(Op::get):
      q.op = Op::get;
      q.keys.emplace_back(r.string(kMaxKey, "key"));
      q.timeout_ms = r.be(8, "timeout");
      break;
    case static_cast<std::uint8_t>(Op::add):
      q.op = Op::add;
      q.keys.emplace_back(r.string(kMaxKey, "key"));
      q.delta = static_cast<std::int64_t>(r.be(8, "delta"));
      break;
    case static_cast<std::uint8_t>(Op::wait):
      q.op = Op::wait;
      q.keys = read_keys(r);
      q.timeout_ms = r.be(8, "timeout");
      break;
    default:
      if (r.ok()) return {std::nullopt, fmt::format("unknown opcode {}", op)};
  }
  r.expect_end();
  if (!r.ok()) return {std::nullopt, r.error()};
  return {std::move(q), {}};
}

DecodedReply decode_reply(const std::uint8_t* body, std::size_t size) {
  Reader r(body, size);
  Reply a;
  const auto status = static_cast<std::uint8_t>(r.be(1, "status"));
  switch (status) {
    case static_cast<std::uint8_t>(Status::ok):
      a.status = Status::ok;
      break;
    case static_cast<std::uint8_t>(Status::value):
      a.status = Status::value;
      if (const auto v = r.string(kMaxValue, "value"); r.ok()) a.value.assign(v.begin(), v.end());
      break;
    case static_cast<std::uint8_t>(Status::integer):
      a.status = Status::integer;
      a.integer = static_cast<std::int64_t>(r.be(8, "integer"));
      break;
    case static_cast<std::uint8_t>(Status::timeout):
      a.status = Status::timeout;
      a.missing = read_keys(r);
      break;
    case static_cast<std::uint8_t>(Status::error):
      a.status = Status::error;
      a.message = std::string(r.string(kMaxValue, "message"));
      break;
    default:
      if (r.ok()) return {std::nullopt, fmt::format("unknown reply status {}", status)};
  }
  r.expect_end();
  if (!r.ok()) return {std::nullopt, r.error()};
  return {std::move(a), {}};
}

}  // namespace kiln::dist::wire
