// The `mnist` plugin's IDX reader (compiled in): raw and gzip files, as Fashion-MNIST ships them.
#include <zlib.h>

#include "fuzz_target.hpp"
#include "idx_reader.hpp"
#include "kiln/errors.hpp"

namespace kiln::fuzz {
namespace {

/// The parsed payload must be exactly what the dimensions announce.
void check_array(const mnist::IdxArray& array) {
  std::uint64_t count = 1;
  for (const std::int64_t d : array.dims) {
    if (d < 0) finding("parse_idx_u8 returned a negative dimension");
    count *= static_cast<std::uint64_t>(d);
  }
  if (count != array.data.size()) finding("parse_idx_u8's payload does not match its dimensions");
}

/// Input: a file's bytes, raw or gzip; read by path (as the plugin does) and parsed as images
/// (3 dimensions) and as labels (1).
bool run_idx(Input input) {
  const std::string path = scratch_dir() + "/fuzz-idx-ubyte";
  write_bytes(path, input);
  std::vector<std::uint8_t> bytes;
  try {
    // A 64 MiB cap so a small gzip bomb fails fast; the plugin's default is 2 GiB.
    bytes = mnist::read_maybe_gzip(path, std::size_t{64} << 20);
  } catch (const kiln::DataError& e) {
    expect_named(e, path);
    return false;
  }
  bool accepted = false;  // as images or as labels
  for (const int ndims : {3, 1}) {
    try {
      check_array(mnist::parse_idx_u8(bytes, path, ndims, ndims == 3 ? "pixels" : "labels"));
      accepted = true;
    } catch (const kiln::DataError& e) {
      expect_named(e, path);
    }
  }
  return accepted;
}

Bytes idx_file(const std::vector<std::uint32_t>& dims) {
  Bytes out{0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  std::size_t count = 1;
  for (const std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(d >> shift));
    count *= d;
  }
  for (std::size_t i = 0; i < count; ++i) out.push_back(static_cast<std::uint8_t>(i * 37));
  return out;
}

Bytes gzipped(const Bytes& raw) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) finding("deflateInit2 failed");
  Bytes out(deflateBound(&z, raw.size()) + 32);
  z.next_in = const_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) finding("deflate did not finish");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::vector<Bytes> idx_seeds() {
  const Bytes images = idx_file({2, 4, 3});
  const Bytes labels = idx_file({5});
  // One file gzipped as two members (concatenated gzip files), split inside the header.
  Bytes two_members = gzipped(Bytes(labels.begin(), labels.begin() + 6));
  const Bytes second = gzipped(Bytes(labels.begin() + 6, labels.end()));
  two_members.insert(two_members.end(), second.begin(), second.end());
  return {images, labels, gzipped(images), two_members};
}

const Target kTargets[] = {
    {"idx", "the mnist plugin's IDX reader: read_maybe_gzip and parse_idx_u8", run_idx, idx_seeds},
};

}  // namespace

std::span<const Target> mnist_targets() { return kTargets; }

}  // namespace kiln::fuzz
