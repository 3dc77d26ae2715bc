// safetensors writer and validating reader (see the header for the rules checked).
#include "kiln/io/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "kiln/errors.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/file_kind.hpp"
#include "kiln/io/json.hpp"
#include "kiln/sdk/checked_size.hpp"
#include "kiln/sdk/crc32c.hpp"

namespace kiln::io {
namespace {

constexpr std::uint64_t kMaxHeader = 100'000'000;  // the reference implementation's limit

DType parse_dtype(const std::string& s, const std::string& where) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  if (s == "F64") return DType::f64;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  if (s == "U8") return DType::u8;
  throw DataError(fmt::format("{}: dtype '{}' is not one Kiln reads (F32, F16, BF16, F64, I32, I64, U8)", where, s));
}

// Byte size of a tensor a file header declares, checked: a hostile shape such as [2^62, 4] must be a
// clear error, not a product that wraps to a small number that then matches its data_offsets.
std::uint64_t declared_bytes(const Shape& shape, DType dtype, const std::string& where) {
  std::int64_t n = 1;
  for (auto d : shape) {
    const auto next = sdk::checked_mul(n, d);
    if (!next) {
      throw DataError(fmt::format("{}: shape {} has more elements than fit in 64 bits; the file is corrupt or "
                                  "not a checkpoint, use another one",
                                  where, shape_string(shape)));
    }
    n = *next;
  }
  const auto bytes = sdk::checked_bytes(n, dtype_size(dtype));
  if (!bytes) {
    throw DataError(fmt::format("{}: shape {} needs more bytes than fit in 64 bits; the file is corrupt or not a "
                                "checkpoint, use another one",
                                where, shape_string(shape)));
  }
  return *bytes;
}

constexpr std::string_view kChecksumPrefix = "kiln.crc32c.";
constexpr std::string_view kMetadataChecksumKey = "kiln.metadata.crc32c";

std::string crc_text(const void* data, std::size_t n) { return fmt::format("{:08x}", crc32c(data, n)); }

/// The CRC-32C of every metadata entry but the metadata checksum itself, in key order, each as
/// key, NUL, value, NUL (keys and values are JSON strings, so the NULs cannot be forged by them).
std::string metadata_crc_text(const std::map<std::string, std::string>& metadata) {
  std::string bytes;
  for (const auto& [key, value] : metadata) {
    if (key == kMetadataChecksumKey) continue;
    bytes.append(key).push_back('\0');
    bytes.append(value).push_back('\0');
  }
  return crc_text(bytes.data(), bytes.size());
}

/// Checks the metadata against its stored checksum, where the file has one (Kiln's writer adds it
/// since 2026-12-03; a PyTorch file or an older Kiln's has none), and removes it. The tensors'
/// checksums cover their bytes, not the header: without this a flipped bit in a trainer file's
/// "epochs_done" or "global_step" resumed a run at the wrong position without a word.
void verify_metadata_checksum(SafetensorsFile& file, const std::string& where) {
  const auto it = file.metadata.find(std::string(kMetadataChecksumKey));
  if (it == file.metadata.end()) return;
  const std::string stored = it->second, actual = metadata_crc_text(file.metadata);
  if (stored != actual) {
    throw DataError(fmt::format("{}: the header's metadata does not match its checksum (CRC-32C {} stored, {} read)",
                                where, stored, actual));
  }
  file.metadata.erase(it);
  file.metadata_checksummed = true;
}

/// Moves the kiln.crc32c.* keys out of `file.metadata` and checks each against its tensor's bytes
/// (already copied into the host tensors).
void verify_checksums(SafetensorsFile& file, const std::string& where) {
  std::map<std::string, std::string> stored;
  for (auto it = file.metadata.begin(); it != file.metadata.end();) {
    if (std::string_view(it->first).substr(0, kChecksumPrefix.size()) == kChecksumPrefix) {
      stored.emplace(it->first.substr(kChecksumPrefix.size()), it->second);
      it = file.metadata.erase(it);
    } else {
      ++it;
    }
  }
  if (stored.empty()) return;  // not written by Kiln's writer: nothing to verify against
  for (const auto& [name, crc] : stored) {
    if (!file.tensors.count(name)) {
      throw DataError(fmt::format("{}: metadata has a checksum for tensor '{}', which the file does not contain",
                                  where, name));
    }
  }
  for (const auto& [name, t] : file.tensors) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      throw DataError(fmt::format("{}: tensor '{}' has no checksum although the file's other tensors do", where,
                                  name));
    }
    const std::string actual = crc_text(t.data(), t.bytes());
    if (it->second != actual) {
      throw DataError(fmt::format("{}: tensor '{}' does not match its checksum (CRC-32C {} stored, {} read)", where,
                                  name, it->second, actual));
    }
  }
  file.checksummed = true;
}

}  // namespace

std::string checksum_key(const std::string& tensor_name) { return std::string(kChecksumPrefix) + tensor_name; }

std::string safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
  }
  return "?";
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorRecord>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::map<std::string, std::string> meta = metadata;
  for (const auto& t : tensors) meta[checksum_key(t.name)] = crc_text(t.data, shape_bytes(t.shape, t.dtype));
  meta[std::string(kMetadataChecksumKey)] = metadata_crc_text(meta);
  std::string header = "{";
  if (!meta.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : meta) {
      header += fmt::format("{}{}:{}", first ? "" : ",", json_quoted(k), json_quoted(v));
      first = false;
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second) throw IoError(fmt::format("{}: two tensors named '{}'", path.string(), t.name));
    const std::uint64_t bytes = shape_bytes(t.shape, t.dtype);
    header += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", json_quoted(t.name), safetensors_dtype(t.dtype),
                          fmt::join(t.shape, ","), offset, offset + bytes);
    offset += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // align the data to 8 bytes
  std::string out;
  out.reserve(8 + header.size() + offset);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  out += header;
  for (const auto& t : tensors) {
    const std::size_t bytes = shape_bytes(t.shape, t.dtype);
    out.append(static_cast<const char*>(t.data), bytes);
  }
  write_file_atomic(path, out);
}

SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  const std::string bytes = read_regular_file(path);  // a directory or a named pipe is named as such
  const std::string where = path.string();
  if (bytes.size() < 8) throw DataError(fmt::format("{}: {} bytes is too short for a safetensors file", where, bytes.size()));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (n > kMaxHeader || 8 + n > bytes.size()) {
    throw DataError(fmt::format("{}: header length {} does not fit in the file ({} bytes)", where, n, bytes.size()));
  }
  const JsonValue header = parse_json(std::string_view(bytes).substr(8, n), where);
  if (header.kind != JsonValue::Kind::object) throw DataError(where + ": header is not a JSON object");
  const std::uint64_t buffer = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;

  SafetensorsFile file;
  struct Range {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (const auto& [name, info] : header.object) {
    if (name == "__metadata__") {
      if (info.kind != JsonValue::Kind::object) throw DataError(where + ": __metadata__ is not an object");
      for (const auto& [k, v] : info.object) {
        if (v.kind != JsonValue::Kind::string) throw DataError(fmt::format("{}: metadata '{}' is not a string", where, k));
        file.metadata[k] = v.text;
      }
      continue;
    }
    const std::string t_where = fmt::format("{}: tensor '{}'", where, name);
    if (file.tensors.count(name)) throw DataError(t_where + " appears twice");
    if (info.kind != JsonValue::Kind::object) throw DataError(t_where + " is not an object");
    const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const auto& [k, v] : info.object) {
      if (k == "dtype") dtype = &v;
      else if (k == "shape") shape = &v;
      else if (k == "data_offsets") offsets = &v;
      else throw DataError(fmt::format("{} has an unknown field '{}'", t_where, k));
    }
    if (!dtype || dtype->kind != JsonValue::Kind::string || !shape || shape->kind != JsonValue::Kind::array ||
        !offsets || offsets->kind != JsonValue::Kind::array || offsets->array.size() != 2) {
      throw DataError(t_where + " needs dtype (string), shape (array) and data_offsets ([begin, end])");
    }
    const DType dt = parse_dtype(dtype->text, t_where);
    Shape s;
    for (const auto& d : shape->array) {
      const std::uint64_t dim = d.as_uint(t_where + " shape");
      if (dim > static_cast<std::uint64_t>(INT64_MAX)) {
        throw DataError(fmt::format("{} has a dimension {} larger than 2^63 - 1; the file is corrupt or not a "
                                    "checkpoint, use another one",
                                    t_where, dim));
      }
      s.push_back(static_cast<std::int64_t>(dim));
    }
    const std::uint64_t begin = offsets->array[0].as_uint(t_where + " data_offsets");
    const std::uint64_t end = offsets->array[1].as_uint(t_where + " data_offsets");
    const std::uint64_t expected = declared_bytes(s, dt, t_where);
    if (end < begin || end - begin != expected) {
      throw DataError(fmt::format("{}: data_offsets [{}, {}] hold {} bytes but {} {} needs {}", t_where, begin, end,
                                  end - begin, dtype->text, shape_string(s), expected));
    }
    if (end > buffer) throw DataError(fmt::format("{} ends at byte {} of a {}-byte data buffer", t_where, end, buffer));
    Tensor t = host_tensor(s, dt);
    std::memcpy(t.data(), data + begin, expected);
    file.tensors.emplace(name, std::move(t));
    ranges.push_back({begin, end, name});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::uint64_t at = 0;
  for (const auto& r : ranges) {
    if (r.begin != at) {
      throw DataError(fmt::format("{}: tensor '{}' starts at byte {} but the previous one ends at {} (gaps and "
                                  "overlaps are not allowed)",
                                  where, r.name, r.begin, at));
    }
    at = r.end;
  }
  if (at != buffer) throw DataError(fmt::format("{}: tensors cover {} of the {} data bytes", where, at, buffer));
  verify_metadata_checksum(file, where);
  verify_checksums(file, where);
  return file;
}

}  // namespace kiln::io
