// The DCT-scaled region decode that the train and eval transforms use (decode_scaled = true,
// the default), checked against what it replaces, on 4:2:0 JPEGs of known colour blocks:
//   - at every scale (1, 1/2, 1/4, 1/8) the decoded rectangle covers the requested one, in
//     scaled coordinates, and each pixel away from block edges has the colour of the block at
//     the matching full-resolution position (the crop's content lands where expected);
//   - end to end through the plugin, a sample with decode_scaled = true stays within a small
//     mean (and bounded worst) difference of the same sample with decode_scaled = false (the
//     full-resolution decode), for train and eval crops large enough to be scaled;
//   - corrupt data on the scaled region path fails with the file named.
// Compiles jpeg_decoder.cpp in (decoder cases) and loads the plugin (end to end).
#define KILN_TEST_MODULE test_imagenet_scaled_decode
#include "kiln_test_main.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "jpeg_decoder.hpp"

namespace fs = std::filesystem;
using namespace kiln_test;

namespace {

constexpr int kBlock = 64;  // colour blocks of 64 x 64 pixels: 8 x 8 at 1/8 scale

// The colour of block (bx, by): distinct per block, far apart in every channel.
Rgb block_colour(int bx, int by) {
  return Rgb{static_cast<unsigned char>(30 + 50 * (bx % 5)), static_cast<unsigned char>(30 + 50 * (by % 5)),
             static_cast<unsigned char>((bx + by) % 2 ? 220 : 40)};
}

std::vector<unsigned char> blocks_rgb(int w, int h) {
  std::vector<unsigned char> rgb(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const Rgb c = block_colour(x / kBlock, y / kBlock);
      std::copy(c.begin(), c.end(), &rgb[(static_cast<std::size_t>(y) * w + x) * 3]);
    }
  }
  return rgb;
}

// A fresh directory holding <root>/train/n000/a.JPEG = `image`.
fs::path one_image_root(const Bytes& image, const std::string& name) {
  const fs::path root = fs::temp_directory_path() / fmt::format("kiln-scaled-{}-{}", ::getpid(), name);
  fs::remove_all(root);
  fs::create_directories(root / "train" / "n000");
  write_file(root / "train" / "n000" / "a.JPEG", image);
  return root;
}

}  // namespace

BOOST_AUTO_TEST_CASE(scaled_regions_cover_the_request_and_hold_the_right_blocks) {
  const int w = 1024, h = 768;  // 16 x 12 blocks
  const Bytes image = encode_rgb_420(blocks_rgb(w, h), w, h, 95);
  const auto header = kiln::imagenet::read_jpeg_header(image, 100'000'000, "blocks.jpg");
  BOOST_TEST_REQUIRE(header.width == w);
  struct Request {
    int x0, y0, x1, y1;  // full-resolution pixels
  };
  const Request requests[] = {{0, 0, w, h}, {300, 200, 900, 700}, {517, 33, 1000, 401}, {64, 640, 448, 768}};
  for (int denom : {1, 2, 4, 8}) {
    for (const Request& r : requests) {
      const int x0 = r.x0 / denom, y0 = r.y0 / denom, x1 = r.x1 / denom, y1 = r.y1 / denom;
      std::vector<unsigned char> rgb;
      const auto region = kiln::imagenet::decode_jpeg_region(image, header, denom, x0, y0, x1, y1, rgb, "blocks.jpg");
      const std::string what = fmt::format("1/{} [{}, {}) x [{}, {})", denom, x0, x1, y0, y1);
      // Rows exactly as asked; columns widened (to an iMCU boundary) but covering the request.
      BOOST_TEST(region.y == y0, what);
      BOOST_TEST(region.height == y1 - y0, what);
      BOOST_TEST(region.x <= x0, what);
      BOOST_TEST(region.x + region.width >= x1, what);
      BOOST_TEST(region.x + region.width <= w / denom, what);
      // Pixels more than 2 scaled pixels (and 4 full-resolution ones, for chroma) from a block
      // edge carry that block's colour, within JPEG error.
      const int margin = std::max(2, 4 / denom);
      int checked = 0, worst = 0;
      for (int y = y0; y < y1; ++y) {
        for (int x = x0; x < x1; ++x) {
          const int fx = x * denom, fy = y * denom;  // top-left of the full-resolution footprint
          const int ex = (x * denom) % kBlock, ey = (y * denom) % kBlock;
          if (ex < margin * denom || ex + denom > kBlock - margin * denom) continue;
          if (ey < margin * denom || ey + denom > kBlock - margin * denom) continue;
          const Rgb want = block_colour(fx / kBlock, fy / kBlock);
          const unsigned char* got =
              &rgb[(static_cast<std::size_t>(y - region.y) * region.width + (x - region.x)) * 3];
          for (int c = 0; c < 3; ++c) worst = std::max(worst, std::abs(int{got[c]} - int{want[c]}));
          ++checked;
        }
      }
      BOOST_TEST(checked > 0, what);
      BOOST_TEST(worst <= 8, what << ": worst channel deviation " << worst);
    }
  }
}

BOOST_AUTO_TEST_CASE(scaled_samples_stay_close_to_the_full_resolution_decode) {
  // A smooth-ish photo stand-in: colour blocks plus a gradient, 1600 x 1200, 4:2:0. Crops of at
  // least 448 px (train with scale_min 0.5, and eval's 224/256 of the shorter side) get 1/2 or
  // 1/4 scale; the output must stay close to the full-resolution path's.
  const int w = 1600, h = 1200;
  std::vector<unsigned char> rgb = blocks_rgb(w, h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      unsigned char* p = &rgb[(static_cast<std::size_t>(y) * w + x) * 3];
      p[1] = static_cast<unsigned char>((p[1] + x * 60 / w) % 256);
    }
  }
  const fs::path root = one_image_root(encode_rgb_420(rgb, w, h, 92), "close");
  for (const char* transform : {"train", "eval"}) {
    const std::string base = fmt::format("root = \"{}\"\ntransform = \"{}\"\nscale_min = 0.5\n", root.string(), transform);
    auto scaled = make_source(base);
    auto full = make_source(base + "decode_scaled = false\n");
    double sum = 0, worst = 0;
    std::size_t n = 0;
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      std::int32_t label = -1;
      const auto a = read_sample(*scaled, 0, seed, label);
      const auto b = read_sample(*full, 0, seed, label);
      BOOST_TEST_REQUIRE(a.size() == b.size());
      const std::size_t plane = a.size() / 3;
      for (std::size_t i = 0; i < a.size(); ++i) {
        // Back to grey levels: (v * std + mean) * 255.
        const float s = i < plane ? 0.229f : i < 2 * plane ? 0.224f : 0.225f;
        const double d = std::abs(a[i] - b[i]) * s * 255.0;
        sum += d;
        worst = std::max(worst, d);
        ++n;
      }
    }
    const double mean = sum / static_cast<double>(n);
    BOOST_TEST_MESSAGE(transform << ": scaled vs full decode, mean abs " << mean << ", worst " << worst << " grey levels");
    BOOST_TEST(mean > 0.0, transform << ": the scaled path was not taken (identical output)");
    BOOST_TEST(mean < 2.0, transform << ": mean abs difference " << mean << " grey levels");
    BOOST_TEST(worst < 64.0, transform << ": worst difference " << worst << " grey levels");
  }
  fs::remove_all(root);
}

BOOST_AUTO_TEST_CASE(corrupt_data_on_the_scaled_path_names_the_file) {
  const int w = 1024, h = 768;
  Bytes image = encode_rgb_420(blocks_rgb(w, h), w, h, 95);
  const auto header = kiln::imagenet::read_jpeg_header(image, 100'000'000, "cut.jpg");
  // Cut in the middle of the entropy-coded data; the region asks for rows below the cut.
  image.resize(image.size() / 2);
  for (int denom : {2, 4, 8}) {
    std::vector<unsigned char> rgb;
    const std::string e = error_of([&] {
      kiln::imagenet::decode_jpeg_region(image, header, denom, 10 / denom, 500 / denom, 900 / denom,
                                         760 / denom, rgb, "cut.jpg");
    });
    BOOST_TEST(contains(e, "cut.jpg: corrupt or truncated JPEG data"), "1/" << denom << ": " << e);
  }
  // End to end: a truncated large image read with a crop that gets scaled.
  const fs::path root = one_image_root(image, "corrupt");
  auto source = make_source(fmt::format("root = \"{}\"\ntransform = \"eval\"\n", root.string()));
  std::int32_t label = -1;
  const std::string e = error_of([&] { read_sample(*source, 0, 1, label); });
  BOOST_TEST(contains(e, (root / "train" / "n000" / "a.JPEG").string()), e);
  BOOST_TEST(contains(e, "corrupt or truncated JPEG data"), e);
  fs::remove_all(root);
}
