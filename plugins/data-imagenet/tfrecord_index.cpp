// TFRecord shard discovery and indexing (see tfrecord_index.hpp for the framing).
//
// Indexing reads only the 12-byte headers (length + its CRC) and seeks over the data, so
// opening 1.28M ImageNet records touches ~15 MB of headers; progress is logged every 64 shards.
#include "tfrecord_index.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "kiln/errors.hpp"
#include "kiln/sdk/crc32c.hpp"
#include "kiln/sdk/log.hpp"

namespace kiln::imagenet {
namespace {

using io::masked_crc32c;  // the core's CRC-32C, shared with TensorBoard event files

namespace fs = std::filesystem;

std::string prefix_of(const std::string& split) { return split == "val" ? "validation" : split; }

struct ShardName {
  long index = -1;
  long total = -1;
};

// "<prefix>-00012-of-01024" -> {12, 1024}; anything else -> index -1.
ShardName parse_shard_name(const std::string& name, const std::string& prefix) {
  ShardName out;
  if (name.size() != prefix.size() + 15 || name.compare(0, prefix.size(), prefix) != 0) return out;
  const std::string rest = name.substr(prefix.size());  // "-00012-of-01024"
  if (rest[0] != '-' || rest.compare(6, 4, "-of-") != 0) return out;
  const std::string a = rest.substr(1, 5), b = rest.substr(10, 5);
  auto digits = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(a) || !digits(b)) return out;
  out.index = std::stol(a);
  out.total = std::stol(b);
  return out;
}

std::uint64_t load_u64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::uint32_t load_u32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace

std::string TfRecordIndex::pattern(const std::string& split) {
  return prefix_of(split) + "-NNNNN-of-MMMMM";
}

bool TfRecordIndex::present(const fs::path& root, const std::string& split) {
  std::error_code ec;
  const std::string prefix = prefix_of(split);
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (parse_shard_name(it->path().filename().string(), prefix).index >= 0) return true;
  }
  return false;
}

TfRecordIndex::TfRecordIndex(const fs::path& root, const std::string& split,
                             std::uint64_t max_record_bytes) {
  const std::string prefix = prefix_of(split);
  std::map<long, std::string> shards;
  long total = -1;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const ShardName s = parse_shard_name(name, prefix);
    if (s.index < 0) continue;
    if (total >= 0 && s.total != total) {
      throw DataError(fmt::format("{}: shard {} says {} shards but another says {}; remove the "
                                  "shards of the other set",
                                  root.string(), name, s.total, total));
    }
    total = s.total;
    shards[s.index] = it->path().string();
  }
  if (ec) throw DataError(fmt::format("{}: cannot list: {}", root.string(), ec.message()));
  if (shards.empty()) {
    throw DataError(fmt::format("{}: no TFRecord shards named {}", root.string(), pattern(split)));
  }
  for (long i = 0; i < total; ++i) {
    if (!shards.count(i)) {
      throw DataError(fmt::format("{}: shard {}-{:05d}-of-{:05d} is missing ({} of {} present); "
                                  "copy the complete set",
                                  root.string(), prefix, i, total, shards.size(), total));
    }
  }
  if (static_cast<long>(shards.size()) != total) {
    throw DataError(fmt::format("{}: {} shards found for a set of {}; a shard index is out of range",
                                root.string(), shards.size(), total));
  }
  for (auto& [i, path] : shards) paths_.push_back(path);

  auto log = kiln::log::get("imagenet");
  for (std::uint32_t s = 0; s < paths_.size(); ++s) {
    index_shard(s, max_record_bytes);
    if ((s + 1) % 64 == 0 && s + 1 < paths_.size()) {
      log->info("indexed {} of {} {} shards ({} records so far)", s + 1, paths_.size(), prefix,
                records_.size());
    }
  }
}

void TfRecordIndex::index_shard(std::uint32_t shard, std::uint64_t max_record_bytes) {
  File file(paths_[shard]);
  const std::uint64_t size = file.size();
  std::uint64_t offset = 0;
  std::uint32_t in_shard = 0;
  while (offset < size) {
    unsigned char header[12];
    if (size - offset < 12 || !file.read_at(offset, header, 12)) {
      throw DataError(fmt::format("{} (record {} at offset {}): truncated record header ({} bytes "
                                  "left, 12 needed); the shard is cut short, copy it again",
                                  paths_[shard], in_shard, offset, size - offset));
    }
    const std::uint64_t length = load_u64(header);
    const std::uint32_t stored = load_u32(header + 8);
    if (masked_crc32c(header, 8) != stored) {
      throw DataError(fmt::format("{} (record {} at offset {}): length CRC mismatch (stored {:#010x}, "
                                  "computed {:#010x}); the shard is corrupt",
                                  paths_[shard], in_shard, offset, stored, masked_crc32c(header, 8)));
    }
    if (length > max_record_bytes) {
      throw DataError(fmt::format("{} (record {} at offset {}): record of {} bytes is over "
                                  "max_record_bytes = {}; raise the limit if the record is genuine",
                                  paths_[shard], in_shard, offset, length, max_record_bytes));
    }
    if (length + 16 > size - offset) {
      throw DataError(fmt::format("{} (record {} at offset {}): truncated record: {} data bytes + "
                                  "16 framing bytes announced, {} left in the file",
                                  paths_[shard], in_shard, offset, length, size - offset));
    }
    records_.push_back(Record{offset, static_cast<std::uint32_t>(length), shard, in_shard});
    offset += length + 16;
    ++in_shard;
  }
}

std::string TfRecordIndex::where(std::int64_t i) const {
  const Record& r = records_[static_cast<std::size_t>(i)];
  return fmt::format("{} (record {} at offset {})", paths_[r.shard], r.in_shard, r.offset);
}

std::string TfRecordIndex::id(std::int64_t i) const {
  const Record& r = records_[static_cast<std::size_t>(i)];
  return fmt::format("{}:{}", std::filesystem::path(paths_[r.shard]).filename().string(), r.in_shard);
}

void TfRecordIndex::read_record(std::int64_t i, std::vector<unsigned char>& out) const {
  const Record& r = records_[static_cast<std::size_t>(i)];
  File file(paths_[r.shard]);
  out.resize(static_cast<std::size_t>(r.length) + 4);
  if (!file.read_at(r.offset + 12, out.data(), out.size())) {
    throw DataError(fmt::format("{}: the shard is shorter than when it was indexed; it changed "
                                "during the run", where(i)));
  }
  const std::uint32_t stored = load_u32(out.data() + r.length);
  out.resize(r.length);
  const std::uint32_t computed = masked_crc32c(out.data(), out.size());
  if (computed != stored) {
    throw DataError(fmt::format("{}: data CRC mismatch (stored {:#010x}, computed {:#010x}); the "
                                "record is corrupt",
                                where(i), stored, computed));
  }
}

}  // namespace kiln::imagenet
