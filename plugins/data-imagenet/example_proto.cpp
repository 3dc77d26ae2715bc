// Protobuf wire-format walk for tf.train.Example (core/example/{example,feature}.proto):
//   Example.features = 1; Features.feature = 1 (map entry: key = 1, value = 2);
//   Feature oneof bytes_list = 1 | float_list = 2 | int64_list = 3; *List.value = 1
// int64 values may be packed (wire type 2, what TensorFlow writes) or not (wire type 0); both
// are accepted. A Reader never reads past its span, so a hostile record can only fail.
#include "example_proto.hpp"

#include <fmt/format.h>

#include "kiln/errors.hpp"

namespace kiln::imagenet {
namespace {

using Bytes = std::span<const unsigned char>;

class Reader {
 public:
  Reader(Bytes data, const std::string& where) : data_(data), where_(where) {}
  bool done() const { return pos_ >= data_.size(); }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) fail("varint runs past the end");
      const unsigned char byte = data_[pos_++];
      value |= static_cast<std::uint64_t>(byte & 0x7Fu) << shift;
      if ((byte & 0x80u) == 0) return value;
    }
    fail("varint longer than 10 bytes");
  }

  Bytes length_delimited() {
    const std::uint64_t len = varint();
    if (len > data_.size() - pos_) {
      fail(fmt::format("field of {} bytes at offset {} runs past the end ({} bytes left)", len,
                       pos_, data_.size() - pos_));
    }
    Bytes out = data_.subspan(pos_, static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return out;
  }

  void skip(std::uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1: advance(8); break;
      case 2: length_delimited(); break;
      case 5: advance(4); break;
      default: fail(fmt::format("unsupported wire type {} at offset {}", wire_type, pos_));
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format("{}: malformed tf.train.Example: {}; the record is corrupt or "
                                "not an Example (rewrite the shard)",
                                where_, what));
  }

 private:
  void advance(std::size_t n) {
    if (n > data_.size() - pos_) fail("fixed-size field runs past the end");
    pos_ += n;
  }

  Bytes data_;
  std::size_t pos_ = 0;
  const std::string& where_;
};

std::string_view as_view(Bytes b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Feature { bytes_list = 1 { value = 1 } } -> first bytes value.
bool first_bytes(Bytes feature, const std::string& where, Bytes& out) {
  Reader f(feature, where);
  while (!f.done()) {
    const std::uint64_t tag = f.varint();
    if ((tag >> 3) == 1 && (tag & 7) == 2) {
      Reader list(f.length_delimited(), where);
      while (!list.done()) {
        const std::uint64_t t = list.varint();
        if ((t >> 3) == 1 && (t & 7) == 2) {
          out = list.length_delimited();
          return true;
        }
        list.skip(static_cast<std::uint32_t>(t & 7));
      }
    } else {
      f.skip(static_cast<std::uint32_t>(tag & 7));
    }
  }
  return false;
}

// Feature { int64_list = 3 { value = 1 (packed or not) } } -> first int64 value.
std::optional<std::int64_t> first_int64(Bytes feature, const std::string& where) {
  Reader f(feature, where);
  while (!f.done()) {
    const std::uint64_t tag = f.varint();
    if ((tag >> 3) == 3 && (tag & 7) == 2) {
      Reader list(f.length_delimited(), where);
      while (!list.done()) {
        const std::uint64_t t = list.varint();
        if ((t >> 3) == 1 && (t & 7) == 0) return static_cast<std::int64_t>(list.varint());
        if ((t >> 3) == 1 && (t & 7) == 2) {
          Reader packed(list.length_delimited(), where);
          if (!packed.done()) return static_cast<std::int64_t>(packed.varint());
          continue;
        }
        list.skip(static_cast<std::uint32_t>(t & 7));
      }
    } else {
      f.skip(static_cast<std::uint32_t>(tag & 7));
    }
  }
  return std::nullopt;
}

}  // namespace

ExampleFields parse_example(Bytes record, const std::string& where) {
  ExampleFields out;
  Reader example(record, where);
  while (!example.done()) {
    const std::uint64_t tag = example.varint();
    if (tag != ((1u << 3) | 2u)) {  // Example.features
      example.skip(static_cast<std::uint32_t>(tag & 7));
      continue;
    }
    Reader features(example.length_delimited(), where);
    while (!features.done()) {
      const std::uint64_t ftag = features.varint();
      if (ftag != ((1u << 3) | 2u)) {  // Features.feature (map entry)
        features.skip(static_cast<std::uint32_t>(ftag & 7));
        continue;
      }
      Reader entry(features.length_delimited(), where);
      std::string_view key;
      Bytes value;
      bool has_value = false;
      while (!entry.done()) {
        const std::uint64_t etag = entry.varint();
        if (etag == ((1u << 3) | 2u)) {
          key = as_view(entry.length_delimited());
        } else if (etag == ((2u << 3) | 2u)) {
          value = entry.length_delimited();
          has_value = true;
        } else {
          entry.skip(static_cast<std::uint32_t>(etag & 7));
        }
      }
      if (!has_value) continue;
      if (key == "image/encoded") {
        Bytes image;
        if (first_bytes(value, where, image)) {
          out.image = image;
          out.has_image = true;
        }
      } else if (key == "image/class/label") {
        out.label = first_int64(value, where);
      }
    }
  }
  return out;
}

}  // namespace kiln::imagenet
