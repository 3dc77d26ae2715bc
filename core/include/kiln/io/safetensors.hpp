// safetensors files: the format checkpoints use, so weights load in PyTorch/HF tools as they are.
//
// Layout (huggingface/safetensors): u64 little-endian header length N; N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "value"}} padded with spaces to a multiple of 8; then the data, each
// tensor's bytes contiguous, row-major, little-endian. The reader checks everything the reference
// implementation checks: header size limit (100 MB), valid JSON of the expected shape, known
// dtypes, offsets contiguous from 0 and covering the whole buffer, byte counts equal to
// numel x dtype size, no duplicate names. Any violation is a DataError naming the file.
//
// Checksums: Kiln's writer also stores a CRC-32C of each tensor's bytes in the metadata, as
// "kiln.crc32c.<tensor name>" = 8 lowercase hex digits (the format allows string values only), and
// the reader verifies every one. A flipped bit in a tensor then fails the load instead of training
// on garbage. Files without any such key (PyTorch's, an older Kiln's) are read unverified;
// SafetensorsFile::checksummed says which case it was. A file that has some keys must have one for
// every tensor and none for a tensor it lacks: a partial set means a damaged or spliced header.
// The metadata itself (a trainer file's position, the run's identity) has one more CRC-32C,
// "kiln.metadata.crc32c", over every other metadata entry; the reader verifies it where present.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kiln/tensor.hpp"

namespace kiln::io {

/// One tensor to write: bytes are read from `data` (host memory, row-major).
struct TensorRecord {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
};

/// Writes `tensors` (in the given order) and string metadata to `path`, adding each tensor's
/// checksum key (see above). Throws IoError.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorRecord>& tensors,
                       const std::map<std::string, std::string>& metadata);

/// A loaded file: every tensor as a host tensor, plus the metadata.
struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  ///< without the checksum keys (already checked)
  bool checksummed = false;                       ///< every tensor's CRC-32C was stored and matched
  bool metadata_checksummed = false;              ///< the metadata's CRC-32C was stored and matched
};

/// The metadata key under which a tensor's CRC-32C is stored.
std::string checksum_key(const std::string& tensor_name);

/// Reads and validates `path`. Throws DataError (corrupt file) or IoError (unreadable).
SafetensorsFile read_safetensors(const std::filesystem::path& path);

/// "F32", "BF16", ... and back (DataError for a dtype Kiln does not have).
std::string safetensors_dtype(DType dtype);

}  // namespace kiln::io
