// Pinned outputs of the `imagenet` plugin: FNV-1a hashes of whole samples (f32 and u8, train
// and eval, sizes with and without vector-loop tails, DCT scaling on and off) for generated
// textured photos, recorded from the code before the speed work of issue 13 (fused resampler
// passes, reused buffers and decoder). Speed changes must keep every sample bit-identical; a
// deliberate change of the output must re-record the table (KILN_PRINT_PINNED=1 prints it).
//
// The hashes hold for libjpeg-turbo 2.1.x (its integer IDCT and fancy upsampling are exact and
// identical in its C and SIMD paths) and for the resampler's fused build (AVX2 + FMA, one rounding
// per multiply-add), which every CPU the benchmarks run on selects: the separate build rounds
// between multiply and add, so on a CPU without FMA the suite exits 77 (CTest: Skipped) with a
// message saying so (test_imagenet_resample tests that build against the definition instead).
// They hold for any compiler: every rounding is written in the source and the plugin builds with
// -ffp-contract=off (resample_kernels.hpp). Until 2026-12-05 which products got fused was the
// compiler's choice, and the hashes held for GCC 12's code only (GCC 14 differed in one sample).
#define KILN_TEST_MODULE test_imagenet_pinned
#include "kiln_test_main.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace fs = std::filesystem;
using namespace kiln_test;

namespace {

// A photo-like RGB image: smooth random colour fields plus per-pixel noise (so Huffman, IDCT,
// upsampling and the resampler all see varied data), deterministic from `seed`.
std::vector<unsigned char> textured(int w, int h, std::uint32_t seed) {
  std::uint32_t state = seed * 2654435761u + 1;
  const auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  constexpr int kCell = 24;
  const int cw = w / kCell + 2, ch = h / kCell + 2;
  std::vector<float> cells(static_cast<std::size_t>(cw) * ch * 3);
  for (float& v : cells) v = static_cast<float>(next() % 256);
  std::vector<unsigned char> rgb(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const float fx = static_cast<float>(x) / kCell, fy = static_cast<float>(y) / kCell;
      const int cx = static_cast<int>(fx), cy = static_cast<int>(fy);
      const float tx = fx - cx, ty = fy - cy;
      for (int c = 0; c < 3; ++c) {
        const auto at = [&](int i, int j) { return cells[(static_cast<std::size_t>(j) * cw + i) * 3 + c]; };
        const float v = (1 - ty) * ((1 - tx) * at(cx, cy) + tx * at(cx + 1, cy)) +
                        ty * ((1 - tx) * at(cx, cy + 1) + tx * at(cx + 1, cy + 1));
        const int noisy = static_cast<int>(v) + static_cast<int>(next() % 21) - 10;
        rgb[(static_cast<std::size_t>(y) * w + x) * 3 + c] = static_cast<unsigned char>(std::clamp(noisy, 0, 255));
      }
    }
  }
  return rgb;
}

struct Tree {
  fs::path root;
  Tree() {
    root = fs::temp_directory_path() / fmt::format("kiln-imagenet-pinned-test-{}", ::getpid());
    fs::remove_all(root);
    const std::array<std::array<int, 2>, 4> sizes{{{500, 375}, {333, 500}, {1000, 750}, {260, 250}}};
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const int w = sizes[i][0], h = sizes[i][1];
      const auto rgb = textured(w, h, static_cast<std::uint32_t>(i));
      // 4:2:0 as most photos; the last one 4:4:4.
      const Bytes jpeg = i + 1 < sizes.size() ? encode_rgb_420(rgb, w, h, 90) : encode_rgb(rgb, w, h, 90);
      write_file(root / "train" / fmt::format("n{:03d}", i) / fmt::format("img_{}.JPEG", i), jpeg);
    }
    // Gray and CMYK decode through their own conversions.
    write_file(root / "train" / "n004" / "img_4.JPEG", gray_jpeg(300, 280, 117));
    write_file(root / "train" / "n005" / "img_5.JPEG", cmyk_jpeg(310, 290, Rgb{200, 60, 30}));
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

const Tree& tree() {
  static Tree t;
  return t;
}

std::uint64_t fnv1a(const unsigned char* p, std::size_t n, std::uint64_t h) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// The hash of samples (index, seeds 0..7) read with the [data.train] options `extra`.
std::uint64_t hash_samples(const std::string& extra, std::int64_t index) {
  auto source = make_source(fmt::format("root = \"{}\"\n{}", tree().root.string(), extra));
  const auto info = source->describe();
  std::size_t bytes = 1;
  for (auto d : info.sample_shape) bytes *= static_cast<std::size_t>(d);
  bytes *= info.sample_dtype == kiln::DType::u8 ? 1 : 4;
  std::vector<unsigned char> sample(bytes);
  std::uint64_t h = 14695981039346656037ull;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    std::int32_t label = -1;
    source->read(index, seed, kiln::SampleSlot{sample.data(), sample.size(), &label});
    h = fnv1a(sample.data(), sample.size(), h);
    h = fnv1a(reinterpret_cast<const unsigned char*>(&label), sizeof label, h);
  }
  return h;
}

struct Case {
  const char* options;
  std::array<std::uint64_t, 6> hashes;  // per image index 0..5
};

// Recorded with the code of 2026-12-02 before the issue 13 speed work (commit 821464d).
const Case kCases[] = {
    {"", {0xa9d91ea728d7f511ull, 0x941f42a6ec90e9dcull, 0x634d6b7263e91e07ull, 0x73830fedc1ebda84ull, 0x1ba9b3b4472cc6c8ull, 0x662f6dd1de7b2ef6ull}},
    {"output = \"u8\"\n", {0x5bef0c348b6c0022ull, 0xb6f18bef34edcbc0ull, 0x8bafb8ca455e5c6dull, 0xcb774adf867fa885ull, 0xea7405a84c7c4ca5ull, 0xdccb01c9f172ea65ull}},
    {"size = 99\nresize = 113\n", {0xcf4142eafa147f08ull, 0x844363cd85c973c6ull, 0xeef48dc429f4b69aull, 0xf56cfcdc044b2cfaull, 0xd1e776a23c198d47ull, 0x84d5ff101aded575ull}},
    {"size = 99\nresize = 113\noutput = \"u8\"\n", {0x1837f05d77bcc115ull, 0x73c70802689ebbb0ull, 0x81b974679f4b78e7ull, 0x128df84b8f46d3dfull, 0xee43c1702f15befdull, 0xb27d8eb68699dccdull}},
    {"transform = \"eval\"\n", {0x4cd2200b2c464225ull, 0x27c27f263c8836b5ull, 0x8d6a3af916f7a025ull, 0x03d561a6b06555b5ull, 0xefda65afb9444875ull, 0x2507eab23e1867a5ull}},
    {"transform = \"eval\"\noutput = \"u8\"\n", {0xe20b6fbc41344025ull, 0xa251bea4db4d25e5ull, 0x8b517c57e5fbdf15ull, 0x06c62807910a1a45ull, 0xea7405a84c7c4ca5ull, 0xdccb01c9f172ea65ull}},
    {"decode_scaled = false\nsize = 99\nresize = 113\n", {0x82a34b5ff18cf55full, 0x565fe037f59bb365ull, 0x3c5864c878073f2bull, 0x934e8ed2f1065272ull, 0xf6329d1e63121f23ull, 0x5d38e3bab42b532full}},
    {"decode_scaled = false\noutput = \"u8\"\nscale_min = 0.5\n", {0x37c44eb40ae3d13eull, 0xef345d81af3a7d7dull, 0x09beaf728a114742ull, 0xcd19135c513a4d98ull, 0xea7405a84c7c4ca5ull, 0xdccb01c9f172ea65ull}},
};

// What the plugin's resample_fused_available() checks (the test loads the plugin, not the code).
bool runs_fused_build() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

BOOST_AUTO_TEST_CASE(samples_match_the_recorded_hashes) {
  const bool print = std::getenv("KILN_PRINT_PINNED") != nullptr;
  if (!runs_fused_build() && !print) {
    // Exit 77: CTest reports the suite Skipped (SKIP_RETURN_CODE), not Passed with nothing compared.
    std::printf("SKIPPED: the hashes are of the resampler's fused (AVX2 + FMA) build, "
                "which this CPU does not run\n");
    std::fflush(stdout);
    std::exit(77);
  }
  for (const Case& c : kCases) {
    std::string escaped;
    for (const char* p = c.options; *p; ++p) escaped += *p == '\n' ? std::string("\\n") : *p == '"' ? std::string("\\\"") : std::string(1, *p);
    std::string line = "    {\"" + escaped + "\", {";
    for (std::int64_t index = 0; index < 6; ++index) {
      const std::uint64_t got = hash_samples(c.options, index);
      line += fmt::format("{}0x{:016x}ull", index ? ", " : "", got);
      if (!print) {
        BOOST_TEST(got == c.hashes[static_cast<std::size_t>(index)],
                   "options {" << c.options << "} image " << index << ": hash " << std::hex << got
                               << " != recorded " << c.hashes[static_cast<std::size_t>(index)]);
      }
    }
    if (print) std::printf("%s}},\n", line.c_str());
  }
}
