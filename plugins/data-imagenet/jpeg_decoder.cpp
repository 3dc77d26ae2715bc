// libjpeg-turbo wrapper (see jpeg_decoder.hpp). TurboJPEG handles (headers) are per thread,
// since a tjhandle is not thread-safe. The libjpeg decode runs in a function whose frame holds
// only C objects, because libjpeg reports errors by longjmp, which skips C++ destructors; its
// output buffer is sized before the call. Decoder warnings: "Premature end of JPEG file" (a
// truncated file) is an error; other warnings (e.g. extraneous bytes before a marker, which
// some ImageNet files have and PIL accepts) are tolerated.
#include "jpeg_decoder.hpp"

#include <fmt/format.h>
#include <turbojpeg.h>
// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <csetjmp>

#include <cstring>

#include "kiln/errors.hpp"

namespace kiln::imagenet {
namespace {

struct Handle {
  tjhandle h = tjInitDecompress();
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (h) tjDestroy(h);
  }
};

tjhandle thread_handle() {
  thread_local Handle handle;
  if (!handle.h) throw DataError("imagenet: tjInitDecompress failed (out of memory?)");
  return handle.h;
}

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

thread_local std::vector<unsigned char> cmyk_scratch;

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void on_message(j_common_ptr cinfo, int level) {
  if (level != -1) return;  // trace messages
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) on_error_exit(cinfo);  // truncated: fail
  ++cinfo->err->num_warnings;
}

struct RegionRequest {
  const unsigned char* data;
  unsigned long size;
  int denom;
  bool cmyk;
  unsigned x0, y0, x1, y1;  // scaled coordinates, already clamped
  unsigned char* out;       // room for (x1 - x0 + 32) * (y1 - y0) * channels bytes
};

// Returns false with err->message set on failure. Only C objects live in this frame.
bool decode_region_raw(const RegionRequest& req, DecodedRegion& region, ErrorManager* err) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->pub);
  err->pub.error_exit = on_error_exit;
  err->pub.emit_message = on_message;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, req.data, req.size);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.scale_num = 1;
  cinfo.scale_denom = static_cast<unsigned>(req.denom);
  cinfo.out_color_space = req.cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  JDIMENSION x = req.x0, width = req.x1 - req.x0;
  if (width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &x, &width);
  if (req.y0 > 0) jpeg_skip_scanlines(&cinfo, req.y0);
  const unsigned channels = req.cmyk ? 4u : 3u;
  const std::size_t stride = static_cast<std::size_t>(cinfo.output_width) * channels;
  unsigned row = 0;
  while (row < req.y1 - req.y0) {
    JSAMPROW line = req.out + row * stride;
    if (jpeg_read_scanlines(&cinfo, &line, 1) != 1) break;
    ++row;
  }
  region = DecodedRegion{static_cast<int>(x), static_cast<int>(req.y0),
                         static_cast<int>(cinfo.output_width), static_cast<int>(row)};
  jpeg_destroy_decompress(&cinfo);  // also aborts: rows below the region are never decoded
  return true;
}

}  // namespace

JpegHeader read_jpeg_header(std::span<const unsigned char> bytes, std::int64_t max_pixels,
                            const std::string& where) {
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPngSignature, 8) == 0) {
    throw DataError(fmt::format("{} is a PNG file, not a JPEG; convert it (build_imagenet_data.py "
                                "lists the 22 such files in ImageNet train), e.g. with "
                                "`convert x.JPEG -quality 95 jpeg:x.JPEG`",
                                where));
  }
  if (bytes.size() < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8) {
    throw DataError(fmt::format("{}: not a JPEG file ({} bytes{}); expected the JPEG signature FF D8",
                                where, bytes.size(),
                                bytes.size() >= 2 ? fmt::format(", starts with {:02X} {:02X}",
                                                                bytes[0], bytes[1])
                                                  : std::string()));
  }
  JpegHeader header;
  int subsamp = 0;
  tjhandle h = thread_handle();
  if (tjDecompressHeader3(h, bytes.data(), static_cast<unsigned long>(bytes.size()), &header.width,
                          &header.height, &subsamp, &header.colorspace) != 0) {
    throw DataError(fmt::format("{}: corrupt JPEG header: {}", where, tjGetErrorStr2(h)));
  }
  const std::int64_t pixels = static_cast<std::int64_t>(header.width) * header.height;
  if (header.width <= 0 || header.height <= 0 || pixels > max_pixels) {
    throw DataError(fmt::format("{}: image is {} x {} = {} pixels, over max_pixels = {}; raise "
                                "max_pixels if the image is genuine",
                                where, header.width, header.height, pixels, max_pixels));
  }
  return header;
}

int pick_scale_denom(double crop_w, double crop_h, int target) {
  for (int denom : {8, 4, 2}) {
    if (crop_w / denom >= target && crop_h / denom >= target) return denom;
  }
  return 1;
}

DecodedRegion decode_jpeg_region(std::span<const unsigned char> bytes, const JpegHeader& header,
                                 int denom, int x0, int y0, int x1, int y1,
                                 std::vector<unsigned char>& rgb, const std::string& where) {
  const tjscalingfactor factor{1, denom};
  const int width = TJSCALED(header.width, factor);
  const int height = TJSCALED(header.height, factor);
  x0 = std::clamp(x0, 0, width - 1);
  y0 = std::clamp(y0, 0, height - 1);
  x1 = std::clamp(x1, x0 + 1, width);
  y1 = std::clamp(y1, y0 + 1, height);
  const bool cmyk = header.colorspace == TJCS_CMYK || header.colorspace == TJCS_YCCK;
  const std::size_t channels = cmyk ? 4 : 3;
  // jpeg_crop_scanline moves the left edge down to an iMCU boundary (at most 31 scaled pixels).
  const std::size_t max_width = std::min<std::size_t>(static_cast<std::size_t>(x1 - x0) + 32,
                                                      static_cast<std::size_t>(width));
  std::vector<unsigned char>& target = cmyk ? cmyk_scratch : rgb;
  target.resize(max_width * static_cast<std::size_t>(y1 - y0) * channels);
  const RegionRequest request{bytes.data(), static_cast<unsigned long>(bytes.size()), denom, cmyk,
                              static_cast<unsigned>(x0), static_cast<unsigned>(y0),
                              static_cast<unsigned>(x1), static_cast<unsigned>(y1), target.data()};
  ErrorManager err;
  DecodedRegion region;
  if (!decode_region_raw(request, region, &err)) {
    throw DataError(fmt::format("{}: corrupt or truncated JPEG data: {}", where, err.message));
  }
  if (region.height < y1 - y0 || region.x > x0 || region.x + region.width < x1) {
    throw DataError(fmt::format("{}: JPEG decoder returned rows {}..{} x columns {}..{} for the "
                                "requested {}..{} x {}..{}; the file is corrupt",
                                where, region.y, region.y + region.height, region.x,
                                region.x + region.width, y0, y1, x0, x1));
  }
  if (cmyk) {
    const std::size_t n = static_cast<std::size_t>(region.width) * region.height;
    rgb.resize(n * 3);
    const unsigned char* s = cmyk_scratch.data();
    unsigned char* d = rgb.data();
    for (std::size_t i = 0; i < n; ++i, s += 4, d += 3) {
      const unsigned k = s[3];
      d[0] = static_cast<unsigned char>((s[0] * k + 127) / 255);
      d[1] = static_cast<unsigned char>((s[1] * k + 127) / 255);
      d[2] = static_cast<unsigned char>((s[2] * k + 127) / 255);
    }
  }
  return region;
}

}  // namespace kiln::imagenet
