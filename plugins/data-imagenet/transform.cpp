// Crop planning (see transform.hpp) and the choice of resampler build: resample() runs the
// fused (AVX2 + FMA) build where the CPU has both, the separate one elsewhere
// (resample_variants.hpp says why there are two).
#include "transform.hpp"

#include <algorithm>
#include <cmath>

#include "resample_variants.hpp"

namespace kiln::imagenet {

CropPlan plan_crop(const TransformOptions& o, int width, int height, SampleRng& rng) {
  CropPlan plan;
  if (o.kind == TransformKind::eval) {
    // torchvision Resize(int): the shorter side becomes exactly `resize`, the longer one
    // int(resize * long / short).
    double resized_w = o.resize, resized_h = o.resize;
    if (width > height) {
      resized_w = std::floor(static_cast<double>(o.resize) * width / height);
    } else if (height > width) {
      resized_h = std::floor(static_cast<double>(o.resize) * height / width);
    }
    const double crop = std::min({static_cast<double>(o.size), resized_w, resized_h});
    // CenterCrop's int(round(d / 2.0)) with Python's round-half-to-even.
    const double left = std::nearbyint((resized_w - crop) / 2.0);
    const double top = std::nearbyint((resized_h - crop) / 2.0);
    const double sx = width / resized_w, sy = height / resized_h;
    plan.rect = CropRect{left * sx, top * sy, crop * sx, crop * sy};
    return plan;
  }
  // torchvision RandomResizedCrop.get_params.
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(o.ratio_min), log_hi = std::log(o.ratio_max);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target = area * rng.uniform(static_cast<float>(o.scale_min), static_cast<float>(o.scale_max));
    const double ratio = std::exp(rng.uniform(static_cast<float>(log_lo), static_cast<float>(log_hi)));
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int top = static_cast<int>(rng.below(static_cast<std::uint64_t>(height - h + 1)));
      const int left = static_cast<int>(rng.below(static_cast<std::uint64_t>(width - w + 1)));
      plan.rect = CropRect{static_cast<double>(left), static_cast<double>(top),
                           static_cast<double>(w), static_cast<double>(h)};
      found = true;
    }
  }
  if (!found) {
    const double in_ratio = static_cast<double>(width) / height;
    int w = width, h = height;
    if (in_ratio < o.ratio_min) {
      h = static_cast<int>(std::lround(w / o.ratio_min));
    } else if (in_ratio > o.ratio_max) {
      w = static_cast<int>(std::lround(h * o.ratio_max));
    }
    w = std::clamp(w, 1, width);
    h = std::clamp(h, 1, height);
    plan.rect = CropRect{static_cast<double>((width - w) / 2), static_cast<double>((height - h) / 2),
                         static_cast<double>(w), static_cast<double>(h)};
  }
  // Drawn even when flip is off, so turning flip off does not change the crops.
  const bool coin = rng.uniform() < 0.5f;
  plan.flip = o.flip && coin;
  return plan;
}

void resample(const unsigned char* rgb, int width, int height, const CropRect& rect, bool flip,
              const TransformOptions& options, void* out) {
  static const bool fused = resample_fused_available();
  (fused ? resample_fused : resample_separate)(rgb, width, height, rect, flip, options, out);
}

}  // namespace kiln::imagenet
