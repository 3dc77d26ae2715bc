// Tests of the imagenet plugin's resampler (transform.cpp, compiled in) against its definition:
// PIL's antialiased bilinear, a triangle filter widened by the downscale factor, restricted to
// the crop's box, computed here directly in double over every source pixel of the box. Covers
// both outputs (normalised f32 CHW and rounded u8 HWC), flip on and off, output sizes whose
// rows end in a partial vector (the vectorised copies handle 8 or 4 pixels a step, the rest
// is scalar), crops touching each image edge, upscaling and downscales past the unrolled tap
// counts. Random pixels, so every byte value and every channel position is exercised. Both
// builds of the resampler (resample_variants.hpp) are tested on every CPU that can run them: the
// separate one runs in training only on CPUs without AVX2 + FMA, which CI does not have.
#define KILN_TEST_MODULE test_imagenet_resample
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "resample_variants.hpp"
#include "transform.hpp"

namespace {

using kiln::imagenet::CropRect;
using kiln::imagenet::SampleFormat;
using kiln::imagenet::TransformOptions;

// One build of the resampler: its name for messages, and the function.
struct Variant {
  const char* name;
  void (*run)(const unsigned char*, int, int, const CropRect&, bool, const TransformOptions&, void*);
};

// The builds this CPU runs: the separate one everywhere, the fused one with AVX2 + FMA.
std::vector<Variant> variants() {
  std::vector<Variant> out{{"separate", kiln::imagenet::resample_separate}};
  if (kiln::imagenet::resample_fused_available()) out.push_back({"fused", kiln::imagenet::resample_fused});
  return out;
}

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
};

Image random_image(int width, int height, unsigned seed) {
  std::mt19937 gen(seed);
  Image image{width, height, std::vector<unsigned char>(static_cast<std::size_t>(width) * height * 3)};
  for (auto& v : image.rgb) v = static_cast<unsigned char>(gen() & 0xFF);
  return image;
}

// Normalised weights of the source pixels [lo, hi) for each of `size` outputs along one axis.
std::vector<std::vector<double>> reference_weights(double start, double length, int size, int lo, int hi) {
  const double scale = length / size;
  const double support = std::max(scale, 1.0);
  std::vector<std::vector<double>> weights(static_cast<std::size_t>(size));
  for (int o = 0; o < size; ++o) {
    const double centre = start + (o + 0.5) * scale;
    auto& w = weights[static_cast<std::size_t>(o)];
    w.assign(static_cast<std::size_t>(hi - lo), 0.0);
    double total = 0;
    for (int x = lo; x < hi; ++x) {
      const double v = std::max(0.0, 1.0 - std::abs(x + 0.5 - centre) / support);
      w[static_cast<std::size_t>(x - lo)] = v;
      total += v;
    }
    BOOST_TEST_REQUIRE(total > 0.0);
    for (double& v : w) v /= total;
  }
  return weights;
}

// The resampled value (0..255 scale) of channel c at output (y, x), before any flip.
struct Reference {
  std::vector<double> values;  // (size, size, 3)
  Reference(const Image& image, const CropRect& rect, int size) : values(static_cast<std::size_t>(size) * size * 3) {
    const int x_lo = std::max(0, static_cast<int>(std::floor(rect.x)));
    const int x_hi = std::min(image.width, static_cast<int>(std::ceil(rect.x + rect.w)));
    const int y_lo = std::max(0, static_cast<int>(std::floor(rect.y)));
    const int y_hi = std::min(image.height, static_cast<int>(std::ceil(rect.y + rect.h)));
    const auto wx = reference_weights(rect.x, rect.w, size, x_lo, x_hi);
    const auto wy = reference_weights(rect.y, rect.h, size, y_lo, y_hi);
    for (int oy = 0; oy < size; ++oy) {
      for (int ox = 0; ox < size; ++ox) {
        for (int c = 0; c < 3; ++c) {
          double sum = 0;
          for (int y = y_lo; y < y_hi; ++y) {
            const double row_weight = wy[static_cast<std::size_t>(oy)][static_cast<std::size_t>(y - y_lo)];
            if (row_weight == 0) continue;
            for (int x = x_lo; x < x_hi; ++x) {
              sum += row_weight * wx[static_cast<std::size_t>(ox)][static_cast<std::size_t>(x - x_lo)] *
                     image.rgb[(static_cast<std::size_t>(y) * image.width + x) * 3 + c];
            }
          }
          values[(static_cast<std::size_t>(oy) * size + ox) * 3 + c] = sum;
        }
      }
    }
  }
};

struct Case {
  const char* name;
  int width, height;
  CropRect rect;
  int size;
};

// f32 values within 0.01 grey levels of the reference (the resampler sums in f32); u8 bytes
// exactly the reference rounded half up, except where the reference lies within 0.01 of a
// rounding tie, where either neighbour is accepted.
void check_case(const Variant& variant, const Case& k, bool flip, unsigned seed) {
  const Image image = random_image(k.width, k.height, seed);
  const Reference want(image, k.rect, k.size);
  const int size = k.size;
  const std::size_t n = static_cast<std::size_t>(size) * size * 3;

  TransformOptions options;
  options.size = size;
  std::vector<float> f32(n);
  variant.run(image.rgb.data(), image.width, image.height, k.rect, flip, options, f32.data());
  options.format = SampleFormat::u8_hwc;
  std::vector<unsigned char> u8(n);
  variant.run(image.rgb.data(), image.width, image.height, k.rect, flip, options, u8.data());

  double worst_f32 = 0;
  int wrong_bytes = 0;
  for (int oy = 0; oy < size; ++oy) {
    for (int ox = 0; ox < size; ++ox) {
      const int dx = flip ? size - 1 - ox : ox;  // where output pixel ox lands
      for (int c = 0; c < 3; ++c) {
        const double v = want.values[(static_cast<std::size_t>(oy) * size + ox) * 3 + c];
        const std::size_t cu = static_cast<std::size_t>(c);
        const double got = (f32[(cu * size + oy) * size + dx] * options.std[cu] + options.mean[cu]) * 255.0;
        worst_f32 = std::max(worst_f32, std::abs(got - v));
        const int byte = u8[(static_cast<std::size_t>(oy) * size + dx) * 3 + cu];
        const double rounded = std::clamp(std::floor(v + 0.5), 0.0, 255.0);
        const bool tie = std::abs(v - std::floor(v) - 0.5) < 0.01;
        if (byte != rounded && !(tie && std::abs(byte - v) < 0.52)) ++wrong_bytes;
      }
    }
  }
  BOOST_TEST(worst_f32 < 0.01, variant.name << ", " << k.name << (flip ? " flipped" : "") << ": f32 off by "
                                            << worst_f32 << " grey levels");
  BOOST_TEST(wrong_bytes == 0, variant.name << ", " << k.name << (flip ? " flipped" : "") << ": " << wrong_bytes
                                            << " u8 values off");
}

const Case kCases[] = {
    {"interior crop, fractional (eval-like), 2x down", 320, 240, {40.25, 30.5, 200.5, 150.75}, 96},
    {"crop at the top-left corner", 300, 260, {0, 0, 170, 140}, 64},
    {"crop at the bottom-right corner", 300, 260, {130, 120, 170, 140}, 64},
    {"whole image, width not a multiple of 8 or 4 (tails)", 233, 197, {0, 0, 233, 197}, 61},
    {"upscale: crop smaller than the output", 90, 70, {10, 5, 50, 40}, 77},
    {"downscale past the unrolled taps (> 8 per pixel)", 640, 480, {0, 40, 640, 400}, 37},
    {"output narrower than one vector", 50, 40, {3, 2, 40, 30}, 7},
    {"output of 224, random-resized-crop-like", 500, 375, {61, 17, 389, 301}, 224},
};

}  // namespace

BOOST_AUTO_TEST_CASE(matches_the_antialiased_bilinear_definition_f32_and_u8) {
  for (const Variant& variant : variants()) {
    unsigned seed = 1;
    for (const Case& k : kCases) {
      check_case(variant, k, false, seed);
      check_case(variant, k, true, seed);
      ++seed;
    }
  }
}

// Flip is an exact mirror of the unflipped output, for both formats, sizes with tails and both
// builds.
BOOST_AUTO_TEST_CASE(flip_mirrors_each_row_exactly) {
  const Image image = random_image(200, 150, 99);
  for (const Variant& variant : variants()) {
    for (int size : {224, 221, 13}) {
      for (SampleFormat format : {SampleFormat::f32_chw, SampleFormat::u8_hwc}) {
        TransformOptions options;
        options.size = size;
        options.format = format;
        const std::size_t n = static_cast<std::size_t>(size) * size * 3;
        const std::size_t bytes = format == SampleFormat::u8_hwc ? n : n * sizeof(float);
        std::vector<unsigned char> plain(bytes), mirrored(bytes);
        const CropRect rect{12, 7, 150, 120};
        variant.run(image.rgb.data(), image.width, image.height, rect, false, options, plain.data());
        variant.run(image.rgb.data(), image.width, image.height, rect, true, options, mirrored.data());
        int mismatches = 0;
        for (int y = 0; y < size; ++y) {
          for (int x = 0; x < size; ++x) {
            for (int c = 0; c < 3; ++c) {
              if (format == SampleFormat::u8_hwc) {
                const std::size_t a = (static_cast<std::size_t>(y) * size + x) * 3 + c;
                const std::size_t b = (static_cast<std::size_t>(y) * size + (size - 1 - x)) * 3 + c;
                mismatches += plain[a] != mirrored[b];
              } else {
                const auto* p = reinterpret_cast<const float*>(plain.data());
                const auto* m = reinterpret_cast<const float*>(mirrored.data());
                const std::size_t plane = static_cast<std::size_t>(c) * size * size + static_cast<std::size_t>(y) * size;
                mismatches += p[plane + x] != m[plane + (size - 1 - x)];
              }
            }
          }
        }
        BOOST_TEST(mismatches == 0, variant.name << ", size " << size << (format == SampleFormat::u8_hwc ? " u8" : " f32"));
      }
    }
  }
}

// resample() runs the fused build where the CPU has AVX2 + FMA (the pinned hashes are of that
// build) and the separate one elsewhere; the two differ only by where they round: not
// bit-identical, but within a few f32 rounding steps of each other.
BOOST_AUTO_TEST_CASE(resample_runs_the_build_this_cpu_selects) {
  const Image image = random_image(500, 375, 7);
  const CropRect rect{61, 17, 389, 301};
  TransformOptions options;
  const std::size_t n = static_cast<std::size_t>(options.size) * options.size * 3;
  std::vector<float> dispatched(n), separate(n);
  kiln::imagenet::resample(image.rgb.data(), image.width, image.height, rect, false, options, dispatched.data());
  kiln::imagenet::resample_separate(image.rgb.data(), image.width, image.height, rect, false, options,
                                    separate.data());
  if (!kiln::imagenet::resample_fused_available()) {
    BOOST_TEST(std::equal(dispatched.begin(), dispatched.end(), separate.begin()),
               "this CPU has no AVX2 + FMA, yet resample() is not the separate build");
    return;
  }
  std::vector<float> fused(n);
  kiln::imagenet::resample_fused(image.rgb.data(), image.width, image.height, rect, false, options, fused.data());
  BOOST_TEST(std::equal(dispatched.begin(), dispatched.end(), fused.begin()), "resample() is not the fused build");
  std::size_t differ = 0;
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    differ += fused[i] != separate[i];
    worst = std::max(worst, static_cast<double>(std::abs(fused[i] - separate[i])));
  }
  // Normalised values are within about 2.7 of 0, where an f32 step is 2.4e-7: a few steps at most.
  BOOST_TEST(worst < 2e-6, "fused and separate builds differ by " << worst);
  // Different rounding must show somewhere in 150,528 values, or the two builds are one.
  BOOST_TEST(differ > 0u, "the fused and separate builds gave the same bits");
  BOOST_TEST_MESSAGE(differ << " of " << n << " values differ between the builds, by at most " << worst);
}
