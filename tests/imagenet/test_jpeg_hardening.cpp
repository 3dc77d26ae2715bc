// Hostile-input tests of the imagenet plugin's JPEG decoding (issue 11 item 3), on JPEGs written
// here and then damaged in known ways:
//   - a failed header or decode must leave nothing behind: the next image on the same thread
//     decodes bit-identically to one decoded on a fresh thread (fresh thread-local state);
//   - libjpeg warnings (a truncated file with an EOI appended, extraneous bytes before a marker)
//     are corruption, named in the message;
//   - a declared size the file's bytes cannot hold is refused from the header, before decoding;
//   - end to end through the plugin, on_error = "skip" reads every good image, replaces exactly
//     the bad ones and counts them.
// The decoder-level cases compile jpeg_decoder.cpp in; the end-to-end case loads the plugin.
#define KILN_TEST_MODULE test_imagenet_jpeg
#include "kiln_test_main.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fixtures.hpp"
#include "jpeg_decoder.hpp"
#include "kiln/errors.hpp"

namespace fs = std::filesystem;
using namespace kiln_test;
using kiln::imagenet::DecodedRegion;
using kiln::imagenet::JpegHeader;

namespace {

constexpr std::int64_t kMaxPixels = 100'000'000;

// Position of the marker FF `code` (searched from the start; the test images have no thumbnail,
// so the first SOF/SOS is the image's).
std::size_t marker_at(const Bytes& b, unsigned char code) {
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    if (b[i] == 0xFF && b[i + 1] == code) return i;
  }
  throw std::runtime_error(fmt::format("marker FF {:02X} not found", code));
}

// Cut right after the SOS marker code, inside its length field: libjpeg runs out of data in the
// header ("Premature end of JPEG file", a warning), then fails with "Bogus marker length", the
// error that left the old per-thread TurboJPEG handle mid-header; now the warning stops it first.
Bytes cut_in_sos_header(Bytes b) {
  b.resize(marker_at(b, 0xDA) + 2);
  return b;
}

// SOF height zeroed: libjpeg fails the header with a fatal error, no warning before it ("Empty
// JPEG image (DNL not supported)"); this also left the old TurboJPEG handle mid-header.
Bytes zero_height(Bytes b) {
  const std::size_t sof = marker_at(b, 0xC0);
  b[sof + 5] = 0;
  b[sof + 6] = 0;
  return b;
}

// The headers, the first `fraction` of the entropy-coded data, then an EOI marker: without the EOI
// libjpeg warns "Premature end of JPEG file"; with it, "Corrupt JPEG data: premature end of data
// segment". The cut is measured from SOS so that it always lands in the data.
Bytes truncate_with_eoi(Bytes b, double fraction) {
  const std::size_t sos = marker_at(b, 0xDA);
  b.resize(sos + static_cast<std::size_t>(static_cast<double>(b.size() - sos) * fraction));
  b.push_back(0xFF);
  b.push_back(0xD9);
  return b;
}

// `n` zero bytes inserted before the SOS marker: "Corrupt JPEG data: n extraneous bytes before
// marker 0xda", a warning libjpeg would otherwise skip past.
Bytes extraneous_before_sos(Bytes b, std::size_t n) {
  b.insert(b.begin() + static_cast<std::ptrdiff_t>(marker_at(b, 0xDA)), n, 0x00);
  return b;
}

// SOF rewritten to declare width x height; the entropy-coded data stays that of the small image.
Bytes forge_size(Bytes b, int width, int height) {
  const std::size_t sof = marker_at(b, 0xC0);
  b[sof + 5] = static_cast<unsigned char>(height >> 8);
  b[sof + 6] = static_cast<unsigned char>(height);
  b[sof + 7] = static_cast<unsigned char>(width >> 8);
  b[sof + 8] = static_cast<unsigned char>(width);
  return b;
}

struct Decoded {
  JpegHeader header;
  DecodedRegion region;
  std::vector<unsigned char> rgb;
};

// Header + decode of columns [x0, x1) x rows [y0, y1) at 1/denom (0, 0, 0, 0: the whole image).
Decoded decode(const Bytes& b, int denom = 1, int x0 = 0, int y0 = 0, int x1 = 0, int y1 = 0) {
  Decoded d;
  d.header = kiln::imagenet::read_jpeg_header(b, kMaxPixels, "test.jpg");
  if (x1 == 0) x1 = d.header.width;
  if (y1 == 0) y1 = d.header.height;
  d.region = kiln::imagenet::decode_jpeg_region(b, d.header, denom, x0, y0, x1, y1, d.rgb, "test.jpg");
  return d;
}

// Runs f on a new thread (fresh thread_local state), rethrowing what it throws.
void on_fresh_thread(const std::function<void()>& f) {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

void check_same(const Decoded& got, const Decoded& want, const std::string& what) {
  BOOST_TEST(got.header.width == want.header.width, what);
  BOOST_TEST(got.header.height == want.header.height, what);
  BOOST_TEST(got.header.colorspace == want.header.colorspace, what);
  BOOST_TEST(got.region.x == want.region.x, what);
  BOOST_TEST(got.region.y == want.region.y, what);
  BOOST_TEST(got.region.width == want.region.width, what);
  BOOST_TEST(got.region.height == want.region.height, what);
  // The decoded rows only (rgb may be larger than the region it holds).
  const std::size_t n = static_cast<std::size_t>(want.region.width) * want.region.height * 3;
  BOOST_TEST_REQUIRE(got.rgb.size() >= n, what);
  BOOST_TEST_REQUIRE(want.rgb.size() >= n, what);
  BOOST_TEST(std::equal(got.rgb.begin(), got.rgb.begin() + static_cast<std::ptrdiff_t>(n),
                        want.rgb.begin()),
             what << ": pixels differ from a fresh decoder's");
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_failed_decode_leaves_nothing_behind_on_its_thread) {
  const Bytes gradient = gradient_jpeg(200, 120);
  const Bytes cmyk = cmyk_jpeg(48, 40, Rgb{30, 50, 210});
  const Bytes gray = gray_jpeg(40, 24, 77);
  struct Good {
    const char* name;
    const Bytes* bytes;
    int denom, x0, y0, x1, y1;
  };
  const Good goods[] = {{"gradient", &gradient, 1, 0, 0, 0, 0},
                        {"gradient region at 1/2", &gradient, 2, 20, 10, 70, 50},
                        {"cmyk", &cmyk, 1, 0, 0, 0, 0},
                        {"gray", &gray, 1, 0, 0, 0, 0}};
  // Each failure kind, on a header error and on a decode error (after a good header).
  struct Bad {
    const char* name;
    Bytes bytes;
    const char* message;
  };
  const Bad bads[] = {
      {"cut in SOS header", cut_in_sos_header(gradient_jpeg(200, 120)),
       "corrupt JPEG header: libjpeg warning \"Premature end of JPEG file\""},
      {"zero height", zero_height(gradient_jpeg(200, 120)),
       "corrupt JPEG header: Empty JPEG image (DNL not supported)"},
      {"truncated + EOI (cmyk)", truncate_with_eoi(cmyk_jpeg(96, 96, Rgb{1, 2, 3}), 0.6),
       "premature end of data segment"},
      {"truncated + EOI", truncate_with_eoi(gradient_jpeg(200, 120), 0.5),
       "premature end of data segment"},
      {"extraneous bytes", extraneous_before_sos(gradient_jpeg(200, 120), 5),
       "5 extraneous bytes before marker 0xda"},
      {"forged size", forge_size(solid_jpeg(16, 16, Rgb{9, 9, 9}), 10000, 9999), "declares 10000 x 9999"},
  };
  for (const Good& good : goods) {
    Decoded fresh;
    on_fresh_thread([&] { fresh = decode(*good.bytes, good.denom, good.x0, good.y0, good.x1, good.y1); });
    for (const Bad& bad : bads) {
      const std::string what = fmt::format("{} after {}", good.name, bad.name);
      // The bad file, then the good one twice (a state change might only show on the second
      // file after the error), all on one new thread; checked here, since Boost.Test assertions
      // belong on the main thread.
      std::string e;
      Decoded after[2];
      on_fresh_thread([&] {
        e = error_of([&] { decode(bad.bytes); });
        for (Decoded& d : after) d = decode(*good.bytes, good.denom, good.x0, good.y0, good.x1, good.y1);
      });
      BOOST_TEST(contains(e, bad.message), what << ": " << e);
      check_same(after[0], fresh, what);
      check_same(after[1], fresh, what + " (second)");
    }
  }
}

BOOST_AUTO_TEST_CASE(libjpeg_warnings_are_corruption_with_the_warning_named) {
  // Truncated with an EOI appended: libjpeg warns and would fill the rest of the image grey.
  const Bytes truncated = truncate_with_eoi(gradient_jpeg(200, 120), 0.5);
  std::string e = error_of([&] { decode(truncated); });
  BOOST_TEST(contains(e, "test.jpg: corrupt or truncated JPEG data: libjpeg warning \"Corrupt JPEG "
                         "data: premature end of data segment\" (warnings count as corruption)"),
             e);
  // Truncated in the entropy-coded data without an EOI: "Premature end of JPEG file", also a
  // warning (libjpeg would insert a fake EOI and carry on).
  Bytes cut = gradient_jpeg(200, 120);
  const std::size_t sos = marker_at(cut, 0xDA);
  cut.resize(sos + (cut.size() - sos) / 2);
  e = error_of([&] { decode(cut); });
  BOOST_TEST(contains(e, "test.jpg: corrupt or truncated JPEG data: libjpeg warning \"Premature end "
                         "of JPEG file\""),
             e);
  // Extraneous bytes in the header: refused when the header is read.
  e = error_of([&] {
    kiln::imagenet::read_jpeg_header(extraneous_before_sos(gradient_jpeg(64, 64), 5), kMaxPixels,
                                     "x.jpg");
  });
  BOOST_TEST(contains(e, "x.jpg: corrupt JPEG header: libjpeg warning \"Corrupt JPEG data: 5 "
                         "extraneous bytes before marker 0xda\""),
             e);
  // A fatal error keeps libjpeg's text without the warning note.
  e = error_of([&] { decode(zero_height(gradient_jpeg(64, 64))); });
  BOOST_TEST(contains(e, "test.jpg: corrupt JPEG header: Empty JPEG image (DNL not supported)"), e);
  BOOST_TEST(!contains(e, "warning"), e);
}

BOOST_AUTO_TEST_CASE(a_declared_size_the_bytes_cannot_hold_is_refused_from_the_header) {
  // The campaign's case: ~7 KB declaring 10000 x 9999 (just under max_pixels = 1e8). A noisy 80 x
  // 80 image at quality 100 is a few KB; its SOF is rewritten.
  std::vector<unsigned char> noise(80 * 80 * 3);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<unsigned char>((i * 7919) >> 3);
  const Bytes forged = forge_size(encode_rgb(noise, 80, 80, 100), 10000, 9999);
  BOOST_TEST_REQUIRE(forged.size() < 1250u * 1250u / 8u);
  const std::string e = error_of([&] {
    kiln::imagenet::read_jpeg_header(forged, kMaxPixels, "forged.JPEG");
  });
  BOOST_TEST(contains(e, fmt::format("forged.JPEG: declares 10000 x 9999 pixels but is only {} bytes; "
                                     "1562500 8x8 blocks need at least 195313 bytes of JPEG data",
                                     forged.size())),
             e);
  // A genuine flat image is far above the bound: 2048 x 2048 mid-grey is 65536 blocks (>= 8192
  // bytes) and libjpeg's standard tables spend ~6 bits per flat block.
  const Bytes flat = gray_jpeg(2048, 2048, 128);
  BOOST_TEST(flat.size() >= 8192u);
  const JpegHeader header = kiln::imagenet::read_jpeg_header(flat, kMaxPixels, "flat.jpg");
  BOOST_TEST(header.width == 2048);
  BOOST_TEST(header.height == 2048);
}

BOOST_AUTO_TEST_CASE(skip_reads_every_good_image_and_counts_exactly_the_bad_ones) {
  const fs::path root = fs::temp_directory_path() / fmt::format("kiln-imagenet-jpeg-{}", ::getpid());
  fs::remove_all(root);
  const fs::path train = root / "train";
  // Sorted order = index; every bad file is followed by a good one, read on the same thread.
  write_file(train / "n001" / "a_good.JPEG", solid_jpeg(64, 48, Rgb{220, 30, 40}));          // 0
  write_file(train / "n001" / "b_bad_header.JPEG", zero_height(gradient_jpeg(96, 80)));     // 1
  write_file(train / "n001" / "c_good.JPEG", gradient_jpeg(96, 80));                          // 2
  write_file(train / "n002" / "a_truncated_eoi.JPEG", truncate_with_eoi(gradient_jpeg(128, 96), 0.6));  // 3
  write_file(train / "n002" / "b_good.JPEG", solid_jpeg(50, 70, Rgb{20, 200, 60}));           // 4
  write_file(train / "n002" / "c_forged.JPEG", forge_size(solid_jpeg(16, 16, Rgb{9, 9, 9}), 10000, 9999));  // 5
  write_file(train / "n002" / "d_good.JPEG", gray_jpeg(40, 40, 128));                         // 6
  write_file(train / "n003" / "a_extraneous.JPEG", extraneous_before_sos(gradient_jpeg(64, 64), 3));  // 7
  write_file(train / "n003" / "b_good.jpg", cmyk_jpeg(48, 48, Rgb{30, 50, 210}));             // 8
  const std::vector<bool> bad = {false, true, false, true, false, true, false, true, false};
  const std::vector<std::int32_t> labels = {0, 0, 0, 1, 1, 1, 1, 2, 2};
  // Eval with resize = size: the crop is the centred square of the shorter side, so every row is
  // decoded and the truncated file fails at any seed.
  const std::string table = fmt::format("root = \"{}\"\ntransform = \"eval\"\nsize = 32\nresize = 32\n",
                                        root.string());

  // Under "fail", each bad file stops the read with its own reason.
  auto strict = make_source(table);
  BOOST_TEST_REQUIRE(strict->describe().count == 9);
  std::int32_t label = -1;
  const std::string reasons[] = {
      "b_bad_header.JPEG: corrupt JPEG header: Empty JPEG image (DNL not supported)",
      "a_truncated_eoi.JPEG: corrupt or truncated JPEG data: libjpeg warning \"Corrupt JPEG data: "
      "premature end of data segment\"",
      "c_forged.JPEG: declares 10000 x 9999 pixels but is only",
      "a_extraneous.JPEG: corrupt JPEG header: libjpeg warning \"Corrupt JPEG data: 3 extraneous "
      "bytes before marker 0xda\""};
  for (std::int64_t i = 1, k = 0; i < 9; i += 2, ++k) {
    const std::string e = error_of([&] { read_sample(*strict, i, 5, label); });
    BOOST_TEST(contains(e, reasons[k]), "sample " << i << ": " << e);
  }

  // Reference pixels of each good image, each decoded on its own fresh thread and source.
  std::vector<std::vector<float>> want(9);
  for (std::int64_t i = 0; i < 9; ++i) {
    if (bad[static_cast<std::size_t>(i)]) continue;
    on_fresh_thread([&] {
      std::int32_t l = -1;
      want[static_cast<std::size_t>(i)] = read_sample(*make_source(table), i, 5, l);
    });
  }

  // One thread reads every index in order under "skip": good ones are themselves, bad ones are
  // replaced by the next (good) index, and exactly the 4 bad files are counted.
  auto lenient = make_source(table + "on_error = \"skip\"\n");
  for (std::int64_t i = 0; i < 9; ++i) {
    const std::size_t expect = bad[static_cast<std::size_t>(i)] ? static_cast<std::size_t>(i) + 1
                                                                : static_cast<std::size_t>(i);
    label = -1;
    const auto pixels = read_sample(*lenient, i, 5, label);
    BOOST_TEST(label == labels[expect], "sample " << i);
    BOOST_TEST((pixels == want[expect]), "sample " << i << " differs from a fresh decode of " << expect);
  }
  BOOST_TEST(lenient->counters().at("skipped_samples") == 4.0);
  std::error_code ec;
  fs::remove_all(root, ec);
}

BOOST_AUTO_TEST_CASE(tfrecord_images_get_the_same_checks_named_by_record) {
  const fs::path root = fs::temp_directory_path() / fmt::format("kiln-imagenet-jpeg-tf-{}", ::getpid());
  fs::remove_all(root);
  Bytes shard;
  append_record(shard, make_example(zero_height(gradient_jpeg(96, 80)), 1));                     // 0
  append_record(shard, make_example(solid_jpeg(64, 48, Rgb{220, 30, 40}), 2));                   // 1
  append_record(shard, make_example(truncate_with_eoi(gradient_jpeg(128, 96), 0.6), 3));          // 2
  append_record(shard, make_example(solid_jpeg(50, 70, Rgb{20, 200, 60}), 4));                   // 3
  append_record(shard, make_example(forge_size(solid_jpeg(16, 16, Rgb{9, 9, 9}), 10000, 9999), 5));  // 4
  write_file(root / "train-00000-of-00001", shard);
  const std::string table = fmt::format("root = \"{}\"\ntransform = \"eval\"\nsize = 32\nresize = 32\n",
                                        root.string());
  auto strict = make_source(table);
  std::int32_t label = -1;
  std::string e = error_of([&] { read_sample(*strict, 0, 1, label); });
  BOOST_TEST(contains(e, "train-00000-of-00001 (record 0 at offset 0): corrupt JPEG header: Empty JPEG "
                         "image (DNL not supported)"),
             e);
  e = error_of([&] { read_sample(*strict, 2, 1, label); });
  BOOST_TEST(contains(e, "(record 2 at offset"), e);
  BOOST_TEST(contains(e, "premature end of data segment"), e);
  e = error_of([&] { read_sample(*strict, 4, 1, label); });
  BOOST_TEST(contains(e, "(record 4 at offset"), e);
  BOOST_TEST(contains(e, "declares 10000 x 9999 pixels but is only"), e);

  // Under skip, each bad record gives the next one's sample (labels are 1-based in the files).
  auto lenient = make_source(table + "on_error = \"skip\"\n");
  std::int32_t want_label = -1;
  const auto red = read_sample(*strict, 1, 1, want_label);
  BOOST_TEST((read_sample(*lenient, 0, 1, label) == red));
  BOOST_TEST(label == 1);
  const auto green = read_sample(*strict, 3, 1, want_label);
  BOOST_TEST((read_sample(*lenient, 2, 1, label) == green));
  BOOST_TEST(label == 3);
  BOOST_TEST(lenient->counters().at("skipped_samples") == 2.0);
  std::error_code ec;
  fs::remove_all(root, ec);
}
