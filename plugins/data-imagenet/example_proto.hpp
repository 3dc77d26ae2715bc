// A minimal tf.train.Example reader: only `image/encoded` (bytes) and `image/class/label`
// (int64), parsed by hand from the protobuf wire format (no protobuf dependency).
//
// Every length and varint is checked against the record's bounds; the returned image bytes point
// into the record buffer (no copy). Unknown fields of any wire type are skipped, so records with
// bounding boxes, text, etc. parse unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kiln::imagenet {

struct ExampleFields {
  std::span<const unsigned char> image;  // empty if `image/encoded` is absent
  bool has_image = false;
  std::optional<std::int64_t> label;     // first value of `image/class/label`
};

/// Parses a serialized Example. Throws DataError "<where>: malformed tf.train.Example: ..." for
/// anything that overruns the record or is not valid wire format. `where` names the file and record.
ExampleFields parse_example(std::span<const unsigned char> record, const std::string& where);

}  // namespace kiln::imagenet
