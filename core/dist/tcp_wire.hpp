// The TCP store's wire format (docs/distributed.md, "The TCP store protocol"): length-prefixed
// frames, a one-byte opcode or status, then fields. Pure encoding/decoding with hard size
// limits, no sockets, so it is tested byte by byte and the server can reject hostile input
// before it allocates anything.
//
//   frame    = u32 body_length (big-endian, 1..kMaxFrame) + body
//   string   = u32 length (big-endian) + bytes        (keys: at most kMaxKey bytes)
//   request  = u8 op + fields:
//     HELLO  magic "KILNSTOR" (8 bytes), u16 version, u32 rank        -> OK
//     SET    string key, string value                                 -> OK
//     GET    string key, u64 timeout_ms                               -> VALUE string | TIMEOUT
//     ADD    string key, i64 delta                                    -> INT i64 | ERROR
//     WAIT   u32 count, count x string key, u64 timeout_ms            -> OK | TIMEOUT
//   reply    = u8 status + fields: OK; VALUE string; INT i64; TIMEOUT u32 count, count x string
//              (the keys still missing); ERROR string (a message for the user)
// Integers are big-endian; i64 is two's complement. A connection's first request must be HELLO.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::dist::wire {

inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::string_view kMagic = "KILNSTOR";
inline constexpr std::size_t kMaxKey = 4096;               ///< bytes in one key
inline constexpr std::size_t kMaxValue = 1u << 20;         ///< bytes in one value (1 MiB)
inline constexpr std::size_t kMaxFrame = kMaxValue + 64 * 1024;  ///< bytes in one frame body
inline constexpr std::size_t kHeader = 4;                  ///< the u32 length prefix

enum class Op : std::uint8_t { hello = 1, set = 2, get = 3, add = 4, wait = 5 };
enum class Status : std::uint8_t { ok = 0, value = 1, integer = 2, timeout = 3, error = 4 };

struct Request {
  Op op = Op::hello;
  std::uint16_t version = 0;           ///< HELLO
  std::uint32_t rank = 0;              ///< HELLO: the client's rank, for the server's messages
  std::vector<std::string> keys;       ///< SET/GET/ADD: one; WAIT: any number
  std::vector<std::uint8_t> value;     ///< SET
  std::int64_t delta = 0;              ///< ADD
  std::uint64_t timeout_ms = 0;        ///< GET/WAIT
};

struct Reply {
  Status status = Status::ok;
  std::vector<std::uint8_t> value;     ///< VALUE
  std::int64_t integer = 0;            ///< INT
  std::vector<std::string> missing;    ///< TIMEOUT
  std::string message;                 ///< ERROR
};

/// A frame (length prefix + body) for the request; throws CommError if a key or value is over
/// its limit (the message says which limit).
std::vector<std::uint8_t> encode(const Request& request);
std::vector<std::uint8_t> encode(const Reply& reply);

/// The body length announced by a 4-byte header, or an error text if it is 0 or over kMaxFrame.
struct FrameLength {
  std::size_t length = 0;
  std::string error;  ///< empty when valid
};
FrameLength frame_length(const std::uint8_t* header);

/// Decodes one frame body. The error text (empty on success) says what is malformed: unknown
/// opcode, a field that runs past the end, bytes left over, an oversized key or value.
struct Decoded {
  std::optional<Request> request;
  std::string error;
};
Decoded decode_request(const std::uint8_t* body, std::size_t size);

struct DecodedReply {
  std::optional<Reply> reply;
  std::string error;
};
DecodedReply decode_reply(const std::uint8_t* body, std::size_t size);

}  // namespace kiln::dist::wire
