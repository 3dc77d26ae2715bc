// IDX files (the MNIST container format): load a file, gunzip it if needed, check every header
// field against the file's exact length, and hand back the dimensions and the payload.
//
// Format: bytes 0-1 are zero, byte 2 the element type code, byte 3 the number of dimensions,
// then one big-endian u32 per dimension, then the elements in row-major order. Every problem
// is a kiln::DataError that starts with the file's path and says what is wrong; nothing here
// reads outside the buffer, whatever the header claims.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::mnist {

/// IDX element type codes (the third magic byte).
enum class IdxType : std::uint8_t {
  u8 = 0x08, i8 = 0x09, i16 = 0x0B, i32 = 0x0C, f32 = 0x0D, f64 = 0x0E
};

/// A parsed IDX array of unsigned bytes.
struct IdxArray {
  std::vector<std::int64_t> dims;   ///< outermost first
  std::vector<std::uint8_t> data;   ///< product(dims) bytes, row-major
};

/// Reads the whole file; if it starts with the gzip magic (1f 8b) it is inflated (concatenated
/// gzip members allowed). Throws DataError for a missing/unreadable file, a corrupt or truncated
/// gzip stream, or a result larger than `max_bytes`.
std::vector<std::uint8_t> read_maybe_gzip(const std::string& path,
                                          std::size_t max_bytes = std::size_t{1} << 31);

/// Parses an IDX image of `bytes` (already decompressed) whose element type must be u8 and
/// whose rank must be `expected_ndims`. `path` prefixes every message; `what` names the payload
/// in messages ("pixels", "labels").
IdxArray parse_idx_u8(std::span<const std::uint8_t> bytes, std::string_view path,
                      int expected_ndims, std::string_view what);

/// read_maybe_gzip + parse_idx_u8.
IdxArray read_idx_u8(const std::string& path, int expected_ndims, std::string_view what);

}  // namespace kiln::mnist
