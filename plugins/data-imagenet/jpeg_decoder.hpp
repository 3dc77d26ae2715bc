// JPEG decoding with libjpeg-turbo's libjpeg API (headers and region decode); no decoder state
// is kept between calls, so one bad file cannot affect the next (see jpeg_decoder.cpp).
//
// Decisions: only the crop's region is decoded: jpeg_crop_scanline (columns, widened to an iMCU
// boundary) and jpeg_skip_scanlines (rows above; rows below are never decoded), available in the
// libjpeg API since libjpeg-turbo 1.5, while the TurboJPEG 2.x API has no region decode
// (tj3SetCroppingRegion is 3.0). DCT-domain downscaling by 1/2, 1/4 or 1/8 (the factors with
// SIMD IDCTs) when the crop stays >= the output size at that scale (3/8..7/8 measured slower
// than full size: scalar IDCTs; see docs/data-imagenet.md). The caller may pass denom 1 always
// (the `decode_scaled = false` key). Gray decodes straight to
// RGB; CMYK/YCCK decode to CMYK and are converted with the Adobe (inverted) convention of the
// Photoshop-written files in ImageNet, as Pillow does: R = C*K/255. A PNG (by signature) is
// rejected with a message saying to convert it: no PNG decoder is linked.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::imagenet {

struct JpegHeader {
  int width = 0;
  int height = 0;
  int colorspace = 0;  // TJCS_*
};

/// Reads the header; throws DataError "<where>: ..." for PNG data, non-JPEG data, a corrupt
/// header (libjpeg warnings included), width*height over `max_pixels`, or a declared size the
/// file is too small to hold (under 1 bit per 8x8 block; see jpeg_decoder.cpp).
JpegHeader read_jpeg_header(std::span<const unsigned char> bytes, std::int64_t max_pixels,
                            const std::string& where);

/// The largest scale 1/denom (denom in 1, 2, 4, 8) at which a crop of crop_w x crop_h pixels is
/// still >= `target` in both dimensions.
int pick_scale_denom(double crop_w, double crop_h, int target);

/// A decoded rectangle of the image scaled by 1/denom: interleaved RGB rows of `width` pixels,
/// its top-left corner at (x, y) of the scaled image.
struct DecodedRegion {
  int x = 0, y = 0, width = 0, height = 0;
};

/// Decodes at least columns [x0, x1) and rows [y0, y1) of the image scaled by 1/denom (scaled
/// coordinates, clamped to the scaled size) into `rgb` (grown as needed, never shrunk, so it may
/// be longer than the region; reuse one per thread). Throws DataError for corrupt
/// or truncated data, including any libjpeg warning met while decoding those rows.
DecodedRegion decode_jpeg_region(std::span<const unsigned char> bytes, const JpegHeader& header,
                                 int denom, int x0, int y0, int x1, int y1,
                                 std::vector<unsigned char>& rgb, const std::string& where);

}  // namespace kiln::imagenet
