// The geometric and photometric transforms: crop planning (RandomResizedCrop / resize + centre
// crop) and one resampling pass from decoded RGB u8 to normalised f32 CHW, or (output = "u8")
// to rounded u8 HWC bytes with normalisation left to the model's backend.
//
// Decisions: planning works on the image header only (before decoding) so the decoder can pick
// a DCT scale for the crop. RandomResizedCrop follows torchvision exactly (10 attempts of
// scale/log-ratio sampling, integer-rounded sizes, then the central-crop fallback). Eval is done
// as one resample of the source rectangle that Resize(resize) + CenterCrop(size) would keep, not
// as two passes. Resampling is PIL's antialiased bilinear (triangle filter widened by the
// downscale factor), restricted to the crop box like resize-after-crop, separable, flip folded in.
#pragma once

#include <array>
#include <cstdint>

#include "kiln/rng.hpp"

namespace kiln::imagenet {

enum class TransformKind { train, eval };
/// What the resampler writes: normalised f32 (3, size, size), or bytes (size, size, 3).
enum class SampleFormat { f32_chw, u8_hwc };

struct TransformOptions {
  TransformKind kind = TransformKind::train;
  int size = 224;
  int resize = 256;  // eval: shorter side before the centre crop
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  bool flip = true;
  SampleFormat format = SampleFormat::f32_chw;
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

/// A source rectangle in pixel coordinates of the full-size image (may be fractional for eval).
struct CropRect {
  double x = 0, y = 0, w = 0, h = 0;
};

struct CropPlan {
  CropRect rect;
  bool flip = false;
};

/// Picks the crop (and flip) for an image of width x height. Train draws from `rng`; eval draws
/// nothing. Always returns a non-empty rectangle inside the image.
CropPlan plan_crop(const TransformOptions& options, int width, int height, SampleRng& rng);

/// Resamples `rect` of the interleaved RGB image (width x height, rows of width*3 bytes) to
/// size x size, mirrored if `flip`, into `out`: for SampleFormat::f32_chw normalised
/// ((v/255 - mean) / std) CHW f32; for u8_hwc the resampled values rounded to bytes, HWC (the
/// same values before the normalisation step, which the backend's normalize_image then does).
void resample(const unsigned char* rgb, int width, int height, const CropRect& rect, bool flip,
              const TransformOptions& options, void* out);

}  // namespace kiln::imagenet
