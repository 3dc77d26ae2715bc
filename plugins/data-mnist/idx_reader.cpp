// IDX reading: whole-file load, gzip inflate with zlib, and a header check that trusts nothing.
//
// Decisions: gzip is recognised by its magic bytes, not the file name, so a renamed file still
// reads; the inflated size is capped so a hostile or corrupt stream cannot exhaust memory; the
// element count is multiplied with an overflow guard before it is compared with the payload,
// so absurd dimensions are reported instead of wrapping around.
#include "idx_reader.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "kiln/errors.hpp"

namespace kiln::mnist {
namespace {

constexpr std::size_t kInflateChunk = std::size_t{1} << 20;
// Largest IDX payload accepted (2 GiB): more than 40 times the MNIST training images.
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 31;

std::string_view type_name(std::uint8_t code) {
  switch (static_cast<IdxType>(code)) {
    case IdxType::u8: return "unsigned byte";
    case IdxType::i8: return "signed byte";
    case IdxType::i16: return "i16";
    case IdxType::i32: return "i32";
    case IdxType::f32: return "f32";
    case IdxType::f64: return "f64";
  }
  return "";
}

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

std::vector<std::uint8_t> inflate_gzip(const std::vector<std::uint8_t>& in, const std::string& path,
                                       std::size_t max_bytes) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {  // 16 + : expect a gzip wrapper
    throw DataError(fmt::format("{}: zlib could not start inflating: out of memory?", path));
  }
  std::vector<std::uint8_t> out;
  zs.next_in = const_cast<Bytef*>(in.data());  // zlib's API is not const-correct
  zs.avail_in = static_cast<uInt>(in.size());
  try {
    for (;;) {
      const std::size_t produced = out.size() - zs.avail_out;
      if (zs.avail_out == 0) {
        if (produced >= max_bytes) {
          throw DataError(fmt::format("{}: inflates to more than {} bytes; that is not an MNIST file",
                                      path, max_bytes));
        }
        out.resize(produced + kInflateChunk);
        zs.next_out = out.data() + produced;
        zs.avail_out = static_cast<uInt>(kInflateChunk);
      }
      const int ret = inflate(&zs, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        if (zs.avail_in == 0) break;
        // Another gzip member may follow (as `cat a.gz b.gz` makes); anything else is garbage.
        if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
          inflateReset(&zs);
          continue;
        }
        throw DataError(fmt::format(
            "{}: {} bytes of garbage after the end of the gzip stream; the file is corrupt, "
            "download it again",
            path, zs.avail_in));
      }
      if (ret == Z_OK) continue;
      if (ret == Z_BUF_ERROR && zs.avail_in == 0) {
        throw DataError(fmt::format(
            "{}: truncated gzip stream: the input ends after {} compressed bytes ({} inflated) "
            "before the end-of-stream marker; the download was cut short, fetch the file again",
            path, in.size(), out.size() - zs.avail_out));
      }
      if (ret == Z_BUF_ERROR) continue;  // needs more output space: the loop grows it
      throw DataError(fmt::format("{}: corrupt gzip data at compressed byte {}: {}", path,
                                  in.size() - zs.avail_in, zs.msg ? zs.msg : "zlib error"));
    }
  } catch (...) {
    inflateEnd(&zs);
    throw;
  }
  out.resize(out.size() - zs.avail_out);
  inflateEnd(&zs);
  return out;
}

}  // namespace

std::vector<std::uint8_t> read_maybe_gzip(const std::string& path, std::size_t max_bytes) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) {
    throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  const std::streamoff size = file.tellg();
  if (size < 0) throw DataError(fmt::format("{}: cannot determine the file size", path));
  if (static_cast<std::uint64_t>(size) > max_bytes) {
    throw DataError(fmt::format("{}: {} bytes is larger than the {} bytes an MNIST file may have",
                                path, size, max_bytes));
  }
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  file.seekg(0);
  if (!file.read(reinterpret_cast<char*>(bytes.data()), size)) {
    throw DataError(fmt::format("{}: read failed after {} of {} bytes: {}", path, file.gcount(),
                                size, std::strerror(errno)));
  }
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    return inflate_gzip(bytes, path, max_bytes);
  }
  return bytes;
}

IdxArray parse_idx_u8(std::span<const std::uint8_t> bytes, std::string_view path,
                      int expected_ndims, std::string_view what) {
  const std::size_t size = bytes.size();
  if (size < 4) {
    throw DataError(fmt::format(
        "{}: truncated: the file has {} bytes, fewer than the 4-byte IDX magic number", path, size));
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    throw DataError(fmt::format(
        "{}: not an IDX file: the magic number starts with {:02x} {:02x}, expected 00 00 "
        "(then the type code and the number of dimensions)",
        path, bytes[0], bytes[1]));
  }
  const std::uint8_t type = bytes[2];
  if (type_name(type).empty()) {
    throw DataError(fmt::format(
        "{}: unknown IDX type code 0x{:02x} in the magic number (known: 0x08 unsigned byte, 0x09 "
        "signed byte, 0x0b i16, 0x0c i32, 0x0d f32, 0x0e f64)",
        path, type));
  }
  if (type != static_cast<std::uint8_t>(IdxType::u8)) {
    throw DataError(fmt::format(
        "{}: IDX type code 0x{:02x} ({}), but MNIST {} must be 0x08 (unsigned byte)", path, type,
        type_name(type), what));
  }
  const int ndims = bytes[3];
  if (ndims != expected_ndims) {
    throw DataError(fmt::format("{}: the IDX header declares {} dimensions, but MNIST {} have {}",
                                path, ndims, what, expected_ndims));
  }
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(ndims);
  if (size < header) {
    throw DataError(fmt::format(
        "{}: truncated: the IDX header of {} dimensions needs {} bytes but the file has {}", path,
        ndims, header, size));
  }

  IdxArray array;
  std::uint64_t elements = 1;
  for (int i = 0; i < ndims; ++i) {
    const std::uint32_t d = big_endian_u32(bytes.data() + 4 + 4 * i);
    if (d == 0) {
      throw DataError(fmt::format("{}: dimension {} of the IDX header is 0; the file holds no {}",
                                  path, i, what));
    }
    if (d > kMaxPayloadBytes / elements) {
      throw DataError(fmt::format(
          "{}: dimension {} of the IDX header is {}, which makes more than {} bytes of {}; the "
          "header is corrupt",
          path, i, d, kMaxPayloadBytes, what));
    }
    elements *= d;
    array.dims.push_back(static_cast<std::int64_t>(d));
  }

  const std::size_t payload = size - header;
  if (payload != elements) {
    const std::string dims = fmt::format("{}", fmt::join(array.dims, " x "));
    const std::string says = ndims == 1 ? fmt::format("{} bytes", elements)
                                        : fmt::format("{} = {} bytes", dims, elements);
    throw DataError(fmt::format(
        "{}: {}: header says {} of {} but the file has {} after the {}-byte header", path,
        payload < elements ? "truncated" : fmt::format("{} trailing bytes", payload - elements),
        says, what, payload, header));
  }
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

IdxArray read_idx_u8(const std::string& path, int expected_ndims, std::string_view what) {
  const std::vector<std::uint8_t> bytes = read_maybe_gzip(path);
  return parse_idx_u8(bytes, path, expected_ndims, what);
}

}  // namespace kiln::mnist
