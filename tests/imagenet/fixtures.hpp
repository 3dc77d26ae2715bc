// Test data writers for the imagenet tests: JPEGs via TurboJPEG (tjCompress2), tf.train.Example
// protobufs and TFRecord framing written by hand, and a helper that loads the `imagenet` plugin
// through the registry with a TOML table validated against its schema.
//
// Everything is generated under a fresh temporary directory per test process, so the tests
// need no data files and leave nothing behind.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/data_source.hpp"

namespace kiln_test {

using Rgb = std::array<unsigned char, 3>;
using Bytes = std::vector<unsigned char>;

/// Encodes interleaved RGB (w x h) as a 4:4:4 JPEG of `quality`.
Bytes encode_rgb(const std::vector<unsigned char>& rgb, int w, int h, int quality = 95);
/// Encodes interleaved RGB (w x h) as a 4:2:0 JPEG (chroma halved both ways, as most photos).
Bytes encode_rgb_420(const std::vector<unsigned char>& rgb, int w, int h, int quality = 95);
/// A solid-colour JPEG.
Bytes solid_jpeg(int w, int h, Rgb colour);
/// A grayscale JPEG of one value.
Bytes gray_jpeg(int w, int h, unsigned char value);
/// A CMYK (YCCK) JPEG whose Adobe-inverted CMYK decodes to `colour`: stored (r, g, b, 255).
Bytes cmyk_jpeg(int w, int h, Rgb colour);
/// A JPEG with a diagonal gradient (so different crops give different tensors).
Bytes gradient_jpeg(int w, int h);
/// Pixels `colour` inside [x0, x1) x [y0, y1) and `outside` elsewhere.
Bytes framed_jpeg(int w, int h, int x0, int y0, int x1, int y1, Rgb inside, Rgb outside);

/// A serialized tf.train.Example with image/encoded, image/class/label (packed int64) and an
/// unrelated image/format feature (to exercise skipping).
Bytes make_example(const Bytes& image, std::int64_t label);
/// An Example with only a label (no image/encoded).
Bytes make_example_without_image(std::int64_t label);
/// Appends one TFRecord (length, masked CRCs) to `out`.
void append_record(Bytes& out, const Bytes& data);

void write_file(const std::filesystem::path& path, const Bytes& bytes);
Bytes read_file(const std::filesystem::path& path);

/// Loads the plugin from KILN_TEST_PLUGIN_DIR and creates a source from the TOML body of a
/// [data.train] table (without `type`). Throws what the plugin throws.
std::shared_ptr<kiln::DataSource> make_source(const std::string& table_body);

/// Reads sample `index` with `seed`; returns the pixels and sets `label`.
std::vector<float> read_sample(const kiln::DataSource& source, std::int64_t index,
                               std::uint64_t seed, std::int32_t& label);

/// The normalised value of 8-bit `v` in channel `c` with ImageNet mean/std.
float normalised(unsigned char v, int c);

/// The message of the kiln::Error that `f` throws, or "<no error>".
std::string error_of(const std::function<void()>& f);

/// Whether `part` occurs in `text`.
bool contains(const std::string& text, const std::string& part);

}  // namespace kiln_test
