// TfRecordIndex: the record offsets of a split's TFRecord shards, built once at open.
//
// Shards are <root>/<prefix>-NNNNN-of-MMMMM (prefix "train", or "validation" for split val, as
// build_imagenet_data.py names them); all M must be present. Framing per record:
//   u64 length (LE) | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)
// The length CRC is checked while indexing (a bad length would misplace every later record);
// the data CRC when the record is read. read_record() opens the shard, preads, closes: no shared
// state (thread-safe) and no descriptor limit with 1024 shards; an open costs microseconds
// against a millisecond decode.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "file_util.hpp"

namespace kiln::imagenet {

class TfRecordIndex {
 public:
  /// Finds and indexes the shards; throws DataError for missing shards, a bad length CRC, a
  /// record over `max_record_bytes` or a truncated record (naming shard, record and offset).
  TfRecordIndex(const std::filesystem::path& root, const std::string& split,
                std::uint64_t max_record_bytes);

  /// Shard file names that would be used for `split`, e.g. "train-*-of-*" (for messages).
  static std::string pattern(const std::string& split);
  /// Whether any shard of `split` exists under `root` (for layout = auto).
  static bool present(const std::filesystem::path& root, const std::string& split);

  std::int64_t size() const noexcept { return static_cast<std::int64_t>(records_.size()); }
  std::size_t num_shards() const noexcept { return paths_.size(); }
  /// Reads record `i` into `out` and verifies its data CRC. Throws DataError.
  void read_record(std::int64_t i, std::vector<unsigned char>& out) const;
  /// "<shard path> (record r at offset o)".
  std::string where(std::int64_t i) const;
  /// "<shard file name>:<record r>" ("validation-00003-of-00128:17"), what kiln predict calls it.
  std::string id(std::int64_t i) const;

 private:
  struct Record {
    std::uint64_t offset;  // of the 12-byte header
    std::uint32_t length;  // data bytes
    std::uint32_t shard;
    std::uint32_t in_shard;
  };
  void index_shard(std::uint32_t shard, std::uint64_t max_record_bytes);

  std::vector<std::string> paths_;
  std::vector<Record> records_;
};

}  // namespace kiln::imagenet
