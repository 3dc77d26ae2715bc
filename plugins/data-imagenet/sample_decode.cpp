// See sample_decode.hpp.
#include "sample_decode.hpp"

#include <cmath>

#include "jpeg_decoder.hpp"
#include "kiln/rng.hpp"

namespace kiln::imagenet {

void decode_sample(std::span<const unsigned char> image, const std::string& where, const TransformOptions& options,
                   std::int64_t max_pixels, bool decode_scaled, std::uint64_t seed, std::vector<unsigned char>& rgb,
                   void* pixels) {
  const JpegHeader header = read_jpeg_header(image, max_pixels, where);
  SampleRng rng(seed);
  const CropPlan plan = plan_crop(options, header.width, header.height, rng);
  const int denom = decode_scaled ? pick_scale_denom(plan.rect.w, plan.rect.h, options.size) : 1;
  // The crop in scaled-image coordinates, and the whole pixels it touches.
  const double f = 1.0 / denom;
  const CropRect scaled{plan.rect.x * f, plan.rect.y * f, plan.rect.w * f, plan.rect.h * f};
  const DecodedRegion region = decode_jpeg_region(
      image, header, denom, static_cast<int>(std::floor(scaled.x)), static_cast<int>(std::floor(scaled.y)),
      static_cast<int>(std::ceil(scaled.x + scaled.w)), static_cast<int>(std::ceil(scaled.y + scaled.h)), rgb, where);
  const CropRect local{scaled.x - region.x, scaled.y - region.y, scaled.w, scaled.h};
  resample(rgb.data(), region.width, region.height, local, plan.flip, options, pixels);
}

}  // namespace kiln::imagenet
