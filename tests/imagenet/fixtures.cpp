// Implementation of the test data writers (see fixtures.hpp). The TFRecord CRC uses the
// core's CRC-32C (kiln/sdk/crc32c.hpp), which test_crc32c checks against the published vector.
#include "fixtures.hpp"

#include <turbojpeg.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "kiln/errors.hpp"
#include "kiln/sdk/crc32c.hpp"
#include "kiln/config/config.hpp"
#include "kiln/plugin/registry.hpp"

namespace kiln_test {
namespace {

Bytes compress(const unsigned char* pixels, int w, int h, int pixel_format, int subsamp, int quality) {
  tjhandle handle = tjInitCompress();
  if (!handle) throw std::runtime_error("tjInitCompress failed");
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int channels = tjPixelSize[pixel_format];
  if (tjCompress2(handle, pixels, w, w * channels, h, pixel_format, &jpeg, &size, subsamp, quality,
                  0) != 0) {
    std::string message = tjGetErrorStr2(handle);
    tjDestroy(handle);
    throw std::runtime_error("tjCompress2: " + message);
  }
  Bytes out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

void put_varint(Bytes& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<unsigned char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<unsigned char>(v));
}

void put_field(Bytes& out, int field, const Bytes& payload) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | 2);
  put_varint(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
}

Bytes str(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Features.feature map entry {key = 1, value = 2}.
Bytes map_entry(const std::string& key, const Bytes& feature) {
  Bytes entry;
  put_field(entry, 1, str(key));
  put_field(entry, 2, feature);
  Bytes wrapped;
  put_field(wrapped, 1, entry);
  return wrapped;
}

Bytes bytes_feature(const Bytes& value) {
  Bytes list;
  put_field(list, 1, value);
  Bytes feature;
  put_field(feature, 1, list);
  return feature;
}

Bytes int64_feature(std::int64_t value) {
  Bytes packed;
  put_varint(packed, static_cast<std::uint64_t>(value));
  Bytes list;
  put_field(list, 1, packed);
  Bytes feature;
  put_field(feature, 3, list);
  return feature;
}

Bytes example_of(const Bytes& features) {
  Bytes example;
  put_field(example, 1, features);
  return example;
}

void put_u32(Bytes& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

}  // namespace

Bytes encode_rgb(const std::vector<unsigned char>& rgb, int w, int h, int quality) {
  return compress(rgb.data(), w, h, TJPF_RGB, TJSAMP_444, quality);
}

Bytes encode_rgb_420(const std::vector<unsigned char>& rgb, int w, int h, int quality) {
  return compress(rgb.data(), w, h, TJPF_RGB, TJSAMP_420, quality);
}

Bytes solid_jpeg(int w, int h, Rgb colour) {
  std::vector<unsigned char> rgb(static_cast<std::size_t>(w) * h * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = colour[i % 3];
  return encode_rgb(rgb, w, h);
}

Bytes gray_jpeg(int w, int h, unsigned char value) {
  std::vector<unsigned char> gray(static_cast<std::size_t>(w) * h, value);
  return compress(gray.data(), w, h, TJPF_GRAY, TJSAMP_GRAY, 95);
}

Bytes cmyk_jpeg(int w, int h, Rgb colour) {
  std::vector<unsigned char> cmyk(static_cast<std::size_t>(w) * h * 4);
  for (std::size_t i = 0; i < cmyk.size(); i += 4) {
    cmyk[i] = colour[0];
    cmyk[i + 1] = colour[1];
    cmyk[i + 2] = colour[2];
    cmyk[i + 3] = 255;
  }
  return compress(cmyk.data(), w, h, TJPF_CMYK, TJSAMP_444, 95);
}

Bytes gradient_jpeg(int w, int h) {
  std::vector<unsigned char> rgb(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      unsigned char* p = &rgb[(static_cast<std::size_t>(y) * w + x) * 3];
      p[0] = static_cast<unsigned char>(x * 255 / (w - 1));
      p[1] = static_cast<unsigned char>(y * 255 / (h - 1));
      p[2] = static_cast<unsigned char>((x + y) * 127 / (w + h));
    }
  }
  return encode_rgb(rgb, w, h);
}

Bytes framed_jpeg(int w, int h, int x0, int y0, int x1, int y1, Rgb inside, Rgb outside) {
  std::vector<unsigned char> rgb(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const Rgb& c = (x >= x0 && x < x1 && y >= y0 && y < y1) ? inside : outside;
      unsigned char* p = &rgb[(static_cast<std::size_t>(y) * w + x) * 3];
      p[0] = c[0];
      p[1] = c[1];
      p[2] = c[2];
    }
  }
  return encode_rgb(rgb, w, h, 100);
}

Bytes make_example(const Bytes& image, std::int64_t label) {
  Bytes features;
  const Bytes format = map_entry("image/format", bytes_feature(str("JPEG")));
  const Bytes encoded = map_entry("image/encoded", bytes_feature(image));
  const Bytes lab = map_entry("image/class/label", int64_feature(label));
  features.insert(features.end(), format.begin(), format.end());
  features.insert(features.end(), lab.begin(), lab.end());
  features.insert(features.end(), encoded.begin(), encoded.end());
  return example_of(features);
}

Bytes make_example_without_image(std::int64_t label) {
  return example_of(map_entry("image/class/label", int64_feature(label)));
}

void append_record(Bytes& out, const Bytes& data) {
  Bytes header;
  const std::uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) header.push_back(static_cast<unsigned char>(length >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  put_u32(out, kiln::io::masked_crc32c(header.data(), header.size()));
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, kiln::io::masked_crc32c(data.data(), data.size()));
}

void write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

Bytes read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::shared_ptr<kiln::DataSource> make_source(const std::string& table_body) {
  static kiln::plugin::Registry registry = [] {
    kiln::plugin::Registry r({std::filesystem::path(KILN_TEST_PLUGIN_DIR)});
    r.scan();
    return r;
  }();
  const kiln::plugin::PluginInfo& info = registry.require(KILN_KIND_DATA, "imagenet", "data.train");
  auto config = kiln::config::Config::parse("[data.train]\ntype = \"imagenet\"\n" + table_body,
                                            "test.toml", {});
  config.plugin_type("data.train");
  const kiln::ParamMap params = config.validate("data.train", info.params);
  kiln::PluginArgs args;
  args.params = &params;
  return registry.create_data(info, args);
}

std::vector<float> read_sample(const kiln::DataSource& source, std::int64_t index,
                               std::uint64_t seed, std::int32_t& label) {
  const auto shape = source.describe().sample_shape;
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  std::vector<float> pixels(n);
  kiln::SampleSlot slot{pixels.data(), n * sizeof(float), &label};
  source.read(index, seed, slot);
  return pixels;
}

float normalised(unsigned char v, int c) {
  constexpr float mean[3] = {0.485f, 0.456f, 0.406f};
  constexpr float stddev[3] = {0.229f, 0.224f, 0.225f};
  return (static_cast<float>(v) / 255.0f - mean[c]) / stddev[c];
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace kiln_test
