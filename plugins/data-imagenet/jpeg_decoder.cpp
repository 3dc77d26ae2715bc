// libjpeg-turbo wrapper (see jpeg_decoder.hpp). Both the header read and the region decode use
// the libjpeg API with a jpeg_decompress_struct and error manager created on the stack for that
// one call and destroyed on every path, success or error: nothing decoder-related outlives a
// call, so a bad file cannot change how the next file on the thread is read.
//
// Why not a per-thread TurboJPEG handle for headers (as before): libjpeg-turbo 2.1.5's
// tjDecompressHeader3 returns -1 from its setjmp error path without jpeg_abort_decompress, so
// after a fatal header error (e.g. "Bogus marker length", "Empty JPEG image") the handle's
// decompress struct stays mid-header, and every later tjDecompressHeader3 on that handle resumes
// the old parse and fails the same way, on good files too. With on_error = "skip" that turned
// one bad file into 64 "consecutive" failures and a stopped run.
//
// libjpeg reports errors by longjmp, which skips C++ destructors, so the libjpeg calls run in
// functions whose frames hold only C objects; the output buffer is sized before the call.
//
// Warnings are corruption: libjpeg emits a warning (emit_message level -1) and carries on with
// made-up data for "Premature end of JPEG file", "Corrupt JPEG data: premature end of data
// segment" (a truncated file with an EOI appended), "Corrupt JPEG data: N extraneous bytes before
// marker 0xXX", bad Huffman codes and the like, which would train on grey or garbage pixels.
// Every warning fails the sample, its text in the message. (TurboJPEG's
// TJFLAG_STOPONWARNING does the same for tjDecompress2, but this 2.1.5 API has no region decode
// and tjDecompressHeader3 takes no flags, so the hook is libjpeg's emit_message.)
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
#include "kiln/sdk/file_error.hpp"

namespace kiln::imagenet {
namespace {

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

thread_local std::vector<unsigned char> cmyk_scratch;

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  bool warning = false;  // the failure was a libjpeg warning, not a libjpeg error
  char message[JMSG_LENGTH_MAX] = {};
};

void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// level -1 is a warning (corrupt data libjpeg would paper over): fail, see the file comment.
// Levels >= 0 are trace messages, ignored.
void on_message(j_common_ptr cinfo, int level) {
  if (level != -1) return;
  reinterpret_cast<ErrorManager*>(cinfo->err)->warning = true;
  on_error_exit(cinfo);
}

// Starts a decompress struct on `err`. The struct is zeroed first so that jpeg_destroy_decompress
// in the error path is a no-op if jpeg_create_decompress itself fails before setting it up.
void prepare(jpeg_decompress_struct& cinfo, ErrorManager* err) {
  std::memset(&cinfo, 0, sizeof cinfo);
  cinfo.err = jpeg_std_error(&err->pub);
  err->pub.error_exit = on_error_exit;
  err->pub.emit_message = on_message;
}

// The libjpeg text of a failure, marked as a warning when it was one.
std::string libjpeg_failure(const ErrorManager& err) {
  if (!err.warning) return err.message;
  return fmt::format("libjpeg warning \"{}\" (warnings count as corruption)", err.message);
}

struct HeaderFields {
  unsigned width = 0, height = 0;
  int components = 0;
  J_COLOR_SPACE space = JCS_UNKNOWN;
};

// Returns false with err->message set on failure. Only C objects live in this frame.
bool read_header_raw(const unsigned char* data, unsigned long size, HeaderFields& out,
                     ErrorManager* err) {
  jpeg_decompress_struct cinfo;
  prepare(cinfo, err);
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, size);
  jpeg_read_header(&cinfo, TRUE);  // TRUE: a tables-only stream is an error (JERR_NO_IMAGE)
  out = HeaderFields{cinfo.image_width, cinfo.image_height, cinfo.num_components,
                     cinfo.jpeg_color_space};
  jpeg_destroy_decompress(&cinfo);
  return true;
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
  prepare(cinfo, err);
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
  ErrorManager err;
  HeaderFields fields;
  if (!read_header_raw(bytes.data(), static_cast<unsigned long>(bytes.size()), fields, &err)) {
    throw sdk::file_error(where, 0, 0, fmt::format("corrupt JPEG header: {}", libjpeg_failure(err)));
  }
  JpegHeader header;
  switch (fields.space) {
    case JCS_GRAYSCALE: header.colorspace = TJCS_GRAY; break;
    case JCS_YCbCr: header.colorspace = TJCS_YCbCr; break;
    case JCS_RGB: header.colorspace = TJCS_RGB; break;
    case JCS_CMYK: header.colorspace = TJCS_CMYK; break;
    case JCS_YCCK: header.colorspace = TJCS_YCCK; break;
    default:
      throw sdk::file_error(where, 0, 0,
                            fmt::format("unsupported JPEG colour space ({} components); expected "
                                        "grayscale, YCbCr, RGB, CMYK or YCCK",
                                        fields.components));
  }
  // libjpeg caps each side at JPEG_MAX_DIMENSION (65500), so these fit in int.
  header.width = static_cast<int>(fields.width);
  header.height = static_cast<int>(fields.height);
  const std::int64_t pixels = static_cast<std::int64_t>(header.width) * header.height;
  if (header.width <= 0 || header.height <= 0 || pixels > max_pixels) {
    throw DataError(fmt::format("{}: image is {} x {} = {} pixels, over max_pixels = {}; raise "
                                "max_pixels if the image is genuine",
                                where, header.width, header.height, pixels, max_pixels));
  }
  // The declared size must be one the file's bytes can hold, checked before any pixel buffer is
  // allocated: a forged SOF (the 7 KB file declaring 10000 x 9999, just under
  // max_pixels) would otherwise get a decode of ~100 megapixels and, where libjpeg does not
  // notice the missing data (coefficients never coded stay zero), train as flat grey. The
  // bound: every 8x8 block of the full-resolution component(s) costs at least one bit of
  // entropy-coded data. A Huffman code is at least 1 bit and each block needs a DC code
  // (sequential: DC + EOB, >= 2 bits; progressive: the DC scan codes every block, >= 1 bit,
  // while EOB runs can make the AC scans nearly free). So a file of n bytes holds at most 8n
  // blocks, headers counted as if they were data (lenient). Photos typically use 0.5-4 bits
  // per pixel, 32-256 times the bound; even a flat Huffman-coded image (~6 bits per block with
  // the standard tables) passes. Only arithmetic-coded flat images (adaptive coding can spend
  // well under a bit per block; libjpeg-turbo decodes them, but photo datasets do not contain
  // them) could be refused while genuine: convert them to Huffman coding (`jpegtran -optimize`).
  const std::int64_t blocks = ((static_cast<std::int64_t>(header.width) + 7) / 8) *
                              ((static_cast<std::int64_t>(header.height) + 7) / 8);
  const std::int64_t min_bytes = (blocks + 7) / 8;
  if (static_cast<std::int64_t>(bytes.size()) < min_bytes) {
    throw sdk::file_error(
        where, 0, 0,
        fmt::format("declares {} x {} pixels but is only {} bytes; {} 8x8 blocks need at least "
                    "{} bytes of JPEG data (1 bit per block), so the file is truncated or its "
                    "header forged",
                    header.width, header.height, bytes.size(), blocks, min_bytes));
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
  // Grown, never shrunk: a resize up from a smaller previous region would zero-fill the bytes
  // libjpeg is about to write (measured ~1% of a sample's instructions).
  const std::size_t need = max_width * static_cast<std::size_t>(y1 - y0) * channels;
  if (target.size() < need) target.resize(need);
  const RegionRequest request{bytes.data(), static_cast<unsigned long>(bytes.size()), denom, cmyk,
                              static_cast<unsigned>(x0), static_cast<unsigned>(y0),
                              static_cast<unsigned>(x1), static_cast<unsigned>(y1), target.data()};
  ErrorManager err;
  DecodedRegion region;
  if (!decode_region_raw(request, region, &err)) {
    throw sdk::file_error(where, 0, 0,
                          fmt::format("corrupt or truncated JPEG data: {}", libjpeg_failure(err)));
  }
  if (region.height < y1 - y0 || region.x > x0 || region.x + region.width < x1) {
    throw DataError(fmt::format("{}: JPEG decoder returned rows {}..{} x columns {}..{} for the "
                                "requested {}..{} x {}..{}; the file is corrupt",
                                where, region.y, region.y + region.height, region.x,
                                region.x + region.width, y0, y1, x0, x1));
  }
  if (cmyk) {
    const std::size_t n = static_cast<std::size_t>(region.width) * region.height;
    if (rgb.size() < n * 3) rgb.resize(n * 3);
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
