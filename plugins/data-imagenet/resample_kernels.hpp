// The separable antialiased-bilinear resampler's loops (transform.hpp's resample()), compiled twice:
// resample_fused.cpp for AVX2 + FMA CPUs, resample_separate.cpp for the rest (resample_variants.hpp).
//
// The resampler precomputes per-axis tap tables (first source index, weights normalised to 1),
// then per output row runs the vertical pass (contiguous bytes, vectorised) over only the crop's
// columns into one L1-resident row, and the horizontal pass on it at once, two output pixels per
// 8-float vector with a fixed (unrolled) tap count. For f32 the horizontal sums go straight to
// CHW with the normalisation folded into one multiply-add (horizontal_row_chw, store_chw8); for
// u8 a row goes through a line buffer and out as HWC bytes rounded half up and clamped to 0..255
// as PIL stores a resized image (round_row_hwc). Both de-interleave with vector shuffles that
// also do the flip, bit-identical to the scalar loops that end each row (test_imagenet_pinned
// holds the outputs to those of the unfused code).
// Scratch is thread_local: read() runs on several loader threads at once.
//
// Every rounding is written out, so the output bits do not depend on the compiler: each
// multiply-add goes through Arith::madd, which the fused build makes one FMA (one rounding) and
// the separate build a multiply and an add (two), and the plugin compiles with
// -ffp-contract=off, so no compiler fuses anything else on its own. The fused form is the one
// the pinned hashes (tests/imagenet/test_pinned_output.cpp) were recorded from: GCC 12 had fused
// exactly these products in its x86-64-v3 clone; GCC 14 fused one differently, and clang fuses
// within expressions by default, so before this the hashes held for one compiler only.
// Only this header's own TUs include it: everything is in an anonymous namespace so that the
// AVX2 and the baseline copies of the helpers never merge at link time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "transform.hpp"

namespace kiln::imagenet {
namespace {

typedef float v8f __attribute__((vector_size(32)));

struct Taps {
  int max_taps = 0;
  std::vector<int> first;       // per output pixel
  std::vector<int> count;       // per output pixel
  std::vector<float> weights;   // out * max_taps
};

// PIL's bilinear with antialiasing: support 1 widened by the downscale factor; taps clamped to
// [lo, hi) so no pixel outside the crop box (or the image) contributes.
void make_taps(double start, double length, int out_size, int lo, int hi, Taps& taps) {
  const double scale = length / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // bilinear support 1.0
  taps.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(static_cast<std::size_t>(out_size));
  taps.count.resize(static_cast<std::size_t>(out_size));
  taps.weights.assign(static_cast<std::size_t>(out_size) * taps.max_taps, 0.0f);
  for (int o = 0; o < out_size; ++o) {
    const double centre = start + (o + 0.5) * scale;
    int x0 = static_cast<int>(std::floor(centre - support + 0.5));
    int x1 = static_cast<int>(std::floor(centre + support + 0.5));
    x0 = std::max(x0, lo);
    x1 = std::min(x1, hi);
    if (x1 <= x0) {  // degenerate: nearest valid pixel
      x0 = std::clamp(static_cast<int>(centre), lo, hi - 1);
      x1 = x0 + 1;
    }
    x1 = std::min(x1, x0 + taps.max_taps);
    float* w = &taps.weights[static_cast<std::size_t>(o) * taps.max_taps];
    double total = 0;
    for (int x = x0; x < x1; ++x) {
      const double d = std::abs((x + 0.5 - centre) / filter_scale);
      const double v = d < 1.0 ? 1.0 - d : 0.0;
      w[x - x0] = static_cast<float>(v);
      total += v;
    }
    if (total <= 0) {
      w[0] = 1.0f;
      x1 = x0 + 1;
      total = 1.0;
    }
    for (int k = 0; k < x1 - x0; ++k) w[k] = static_cast<float>(w[k] / total);
    taps.first[static_cast<std::size_t>(o)] = x0;
    taps.count[static_cast<std::size_t>(o)] = x1 - x0;
  }
}

struct Scratch {
  Taps horizontal, vertical;
  std::vector<float> row;           // one row of the crop's columns, interleaved RGB (+ pad)
  std::vector<float> pair_weights;  // per output pair and tap: 4 x weight of each pixel
  std::vector<int> pair_offsets;    // per output pair: each pixel's first tap, as a float offset in a row
  std::vector<float> line;          // one output row, 4 floats (RGB, unused) per pixel
};

// One row of pass 1: dst[i] = sum over k < n of w[k] * src[k * stride + i], i < len, in k order
// with the first product alone (one Arith::madd per later tap). kTaps > 0 fixes
// n at compile time, so the sum stays in a register across the taps and dst is stored once; 0
// takes n and makes n passes over dst (one row: they stay in L1). Plain loops that GCC
// vectorises (vpmovzxbd + vcvtdq2ps; GCC 12 converts u8 vector-extension lanes one at a time).
// Both forms round identically. always_inline so each build inlines its own copy.
template <class Arith, int kTaps>
__attribute__((always_inline)) inline void vertical_pass(const unsigned char* src, std::size_t stride,
                                                         const float* w, int n, std::size_t len,
                                                         float* __restrict dst) {
  if constexpr (kTaps > 0) {
    // From 0, as the kTaps = 0 form starts from the first product alone: madd(w0, x0, 0) (an
    // FMA, or a multiply and an add) is exactly w0 * x0 rounded (weights and pixels are >= 0).
    // Fusing the second product instead would round differently.
    for (std::size_t i = 0; i < len; ++i) {
      float acc = 0.0f;
      for (int k = 0; k < kTaps; ++k) {
        acc = Arith::madd(w[k], static_cast<float>(src[static_cast<std::size_t>(k) * stride + i]), acc);
      }
      dst[i] = acc;
    }
    return;
  }
  for (std::size_t i = 0; i < len; ++i) dst[i] = w[0] * static_cast<float>(src[i]);
  for (int k = 1; k < n; ++k) {
    const float wk = w[k];
    const unsigned char* sk = src + static_cast<std::size_t>(k) * stride;
    for (std::size_t i = 0; i < len; ++i) dst[i] = Arith::madd(wk, static_cast<float>(sk[i]), dst[i]);
  }
}

// Pass 2 for one pair of output pixels: one 8-float vector (R, G, B, unused of each pixel) per
// tap; offsets[2 * pair + i] is where pixel i of the pair has its first tap in `row`
// (precomputed per call: the index arithmetic was a third of this loop's instructions), pw the
// pair's pre-broadcast weights. kTaps > 0 fixes the tap count at compile time (unrolled); 0
// takes `taps`. always_inline (as all helpers here) so each build inlines its own copy for
// its ISA.
template <class Arith, int kTaps>
__attribute__((always_inline)) inline void pair_sum(const float* row, const int* offsets, int pair, int taps,
                                                    const float* pw, v8f& acc) {
  typedef float v4f __attribute__((vector_size(16)));
  const int n = kTaps > 0 ? kTaps : taps;
  const float* p0 = row + offsets[2 * pair];
  const float* p1 = row + offsets[2 * pair + 1];
  acc = v8f{};
  for (int k = 0; k < n; ++k, pw += 8) {
    v4f lo, hi;
    v8f w;
    std::memcpy(&lo, p0 + 3 * k, sizeof lo);
    std::memcpy(&hi, p1 + 3 * k, sizeof hi);
    std::memcpy(&w, pw, sizeof w);
    acc = Arith::madd(w, __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7), acc);
  }
}

// Pass 2 for pairs [begin, end) of one output row into line[8 * pair ...]: pixels as (R, G, B,
// unused) floats. An odd last pixel pairs with itself.
template <class Arith, int kTaps>
__attribute__((always_inline)) inline void horizontal_pass(const float* row, const int* offsets, int begin,
                                                           int end, int taps, const float* pw, float* line) {
  const int n = kTaps > 0 ? kTaps : taps;
  for (int pair = begin; pair < end; ++pair) {
    v8f acc;
    pair_sum<Arith, kTaps>(row, offsets, pair, taps, pw + static_cast<std::size_t>(pair) * n * 8, acc);
    std::memcpy(line + 8 * static_cast<std::size_t>(pair), &acc, sizeof acc);
  }
}

// The normalisation of pass 2's f32 output.
struct Normalise {
  v8f a0, a1, a2, b0, b1, b2;  // v * a[c] + b[c] per channel, broadcast
};

// Writes eight pixels, given as four pair vectors (R, G, B, unused of each), normalised to the
// three planes (plane floats apart) at `at`, mirrored if flip. An in-lane 4x4 transpose (unpack
// + shufps) leaves each channel as pixels (0 2 4 6 | 1 3 5 7), and one cross-lane permute puts
// them in order, or in reverse order for the flip at no extra cost.
template <class Arith>
__attribute__((always_inline)) inline void store_chw8(v8f p01, v8f p23, v8f p45, v8f p67, bool flip,
                                                      const Normalise& n, std::size_t plane, float* at) {
  const v8f rg0 = __builtin_shufflevector(p01, p23, 0, 8, 1, 9, 4, 12, 5, 13);
  const v8f bx0 = __builtin_shufflevector(p01, p23, 2, 10, 3, 11, 6, 14, 7, 15);
  const v8f rg1 = __builtin_shufflevector(p45, p67, 0, 8, 1, 9, 4, 12, 5, 13);
  const v8f bx1 = __builtin_shufflevector(p45, p67, 2, 10, 3, 11, 6, 14, 7, 15);
  const v8f r = __builtin_shufflevector(rg0, rg1, 0, 1, 8, 9, 4, 5, 12, 13);
  const v8f g = __builtin_shufflevector(rg0, rg1, 2, 3, 10, 11, 6, 7, 14, 15);
  const v8f bl = __builtin_shufflevector(bx0, bx1, 0, 1, 8, 9, 4, 5, 12, 13);
#if defined(__clang__)
  // clang has no variable-mask shuffle (GCC's __builtin_shuffle: one vpermps); only the fuzz
  // build (scripts/fuzz.sh) compiles this file with clang, so a select of the two fixed orders.
  const auto in_order = [flip](v8f v) {
    return flip ? __builtin_shufflevector(v, v, 7, 3, 6, 2, 5, 1, 4, 0)
                : __builtin_shufflevector(v, v, 0, 4, 1, 5, 2, 6, 3, 7);
  };
  const v8f red = Arith::madd(in_order(r), n.a0, n.b0);
  const v8f green = Arith::madd(in_order(g), n.a1, n.b1);
  const v8f blue = Arith::madd(in_order(bl), n.a2, n.b2);
#else
  typedef int v8i __attribute__((vector_size(32)));
  const v8i order = flip ? v8i{7, 3, 6, 2, 5, 1, 4, 0} : v8i{0, 4, 1, 5, 2, 6, 3, 7};
  const v8f red = Arith::madd(__builtin_shuffle(r, order), n.a0, n.b0);
  const v8f green = Arith::madd(__builtin_shuffle(g, order), n.a1, n.b1);
  const v8f blue = Arith::madd(__builtin_shuffle(bl, order), n.a2, n.b2);
#endif
  std::memcpy(at, &red, sizeof red);
  std::memcpy(at + plane, &green, sizeof green);
  std::memcpy(at + 2 * plane, &blue, sizeof blue);
}

// Pass 2 and the f32 copy fused, for one output row: eight pixels (four pairs) per step go from
// the tap sums straight to the CHW planes of out_row, with no store and reload in between.
// Returns how many pixels it wrote (size rounded down to 8); the caller does the rest.
template <class Arith, int kTaps>
__attribute__((always_inline)) inline int horizontal_row_chw(const float* row, const int* offsets, int size,
                                                             int taps, const float* pw, bool flip,
                                                             const Normalise& norm, std::size_t plane,
                                                             float* out_row) {
  const std::size_t step = static_cast<std::size_t>(kTaps > 0 ? kTaps : taps) * 8;  // weights per pair
  int ox = 0;
  for (; ox + 8 <= size; ox += 8) {
    const int pair = ox / 2;
    const float* w = pw + static_cast<std::size_t>(pair) * step;
    v8f p01, p23, p45, p67;
    pair_sum<Arith, kTaps>(row, offsets, pair, taps, w, p01);
    pair_sum<Arith, kTaps>(row, offsets, pair + 1, taps, w + step, p23);
    pair_sum<Arith, kTaps>(row, offsets, pair + 2, taps, w + 2 * step, p45);
    pair_sum<Arith, kTaps>(row, offsets, pair + 3, taps, w + 3 * step, p67);
    store_chw8<Arith>(p01, p23, p45, p67, flip, norm, plane, out_row + (flip ? size - 8 - ox : ox));
  }
  return ox;
}

// The u8 copy of one output row: `line` holds pixels as (R, G, B, unused) floats; writes each
// value rounded half up and clamped to 0..255 (as the scalar tail does) as HWC bytes, mirrored
// if kFlip. Four pixels per step: round and convert 8 lanes (two pixels) at a time, then one
// byte shuffle picks the low byte of each R, G, B (dropping the unused lane), in order or
// reversed, into 12 bytes. Returns how many pixels it wrote (size rounded down to 4).
template <bool kFlip>
__attribute__((always_inline)) inline int round_row_hwc(const float* line, int size, unsigned char* out_row) {
  typedef float v8f __attribute__((vector_size(32)));
  typedef int v8i __attribute__((vector_size(32)));
  typedef unsigned char v32u __attribute__((vector_size(32)));
  typedef unsigned char v16u __attribute__((vector_size(16)));
  const v8f half = 0.5f + v8f{}, lo = v8f{}, hi = 255.0f + v8f{};
  const auto to_bytes = [&](const float* p, v32u& out) __attribute__((always_inline)) {
    v8f v;
    std::memcpy(&v, p, sizeof v);
    v += half;
    v = v < lo ? lo : v;  // std::clamp(v, 0, 255) lane-wise
    v = v > hi ? hi : v;
    const v8i ints = __builtin_convertvector(v, v8i);  // truncation, as static_cast<unsigned char>
    std::memcpy(&out, &ints, sizeof out);
  };
  int ox = 0;
  for (; ox + 4 <= size; ox += 4) {
    v32u p01, p23;  // bytes of pixels (0 | 1) and (2 | 3), each value the low byte of an int
    to_bytes(line + 4 * ox, p01);
    to_bytes(line + 4 * ox + 8, p23);
    v16u rgb;
    if constexpr (kFlip) {
      rgb = __builtin_shufflevector(p01, p23, 48, 52, 56, 32, 36, 40, 16, 20, 24, 0, 4, 8, 0, 0, 0, 0);
    } else {
      rgb = __builtin_shufflevector(p01, p23, 0, 4, 8, 16, 20, 24, 32, 36, 40, 48, 52, 56, 0, 0, 0, 0);
    }
    std::memcpy(out_row + 3 * static_cast<std::size_t>(kFlip ? size - 4 - ox : ox), &rgb, 12);
  }
  return ox;
}

template <class Arith>
void resample_with(const unsigned char* rgb, int width, int height, const CropRect& rect, bool flip,
                   const TransformOptions& options, void* out_bytes) {
  thread_local Scratch scratch;
  const int size = options.size;
  const int x_lo = std::max(0, static_cast<int>(std::floor(rect.x)));
  const int x_hi = std::max(x_lo + 1, std::min(width, static_cast<int>(std::ceil(rect.x + rect.w))));
  const int y_lo = std::max(0, static_cast<int>(std::floor(rect.y)));
  const int y_hi = std::max(y_lo + 1, std::min(height, static_cast<int>(std::ceil(rect.y + rect.h))));
  make_taps(rect.x, rect.w, size, x_lo, x_hi, scratch.horizontal);
  make_taps(rect.y, rect.h, size, y_lo, y_hi, scratch.vertical);
  const Taps& th = scratch.horizontal;
  const Taps& tv = scratch.vertical;

  // Per output row: pass 1 (vertical) makes one row of the crop's columns, still interleaved
  // RGB, as f32, into `row`; pass 2 (horizontal) reads it back at once, from L1 (a row is at
  // most a few KB; the whole (size, columns) intermediate was over 1 MB and went through L2).
  // The row ends in a zeroed pad of 3 * taps + 1 floats: pass 2 reads a fixed `taps` taps
  // (weights past a pixel's count are 0) 4 floats wide from its first tap, which may reach past
  // the crop's last column; 0 * pad stays 0. Only [0, len) is rewritten, so the pad is zeroed
  // once per call.
  const int columns = x_hi - x_lo;
  // Pass 2's fixed tap count: the most any output pixel has (often one under max_taps).
  const int taps = *std::max_element(th.count.begin(), th.count.end());
  const std::size_t len = static_cast<std::size_t>(columns) * 3;
  const std::size_t row_floats = len + 3 * static_cast<std::size_t>(taps) + 1;
  scratch.row.resize(row_floats);
  std::fill(scratch.row.begin() + static_cast<std::ptrdiff_t>(len), scratch.row.end(), 0.0f);
  float* const row = scratch.row.data();
  const std::size_t src_stride = static_cast<std::size_t>(width) * 3;
  const unsigned char* const src = rgb + static_cast<std::size_t>(x_lo) * 3;

  // Pass 2, horizontal: output pixels in pairs, one 8-float vector (R, G, B, unused of each)
  // per tap, weights pre-broadcast per pair, into a (size, 4) line; then normalise the line into
  // CHW or round it into HWC bytes. An odd last pixel pairs with itself.
  const std::size_t pairs = (static_cast<std::size_t>(size) + 1) / 2;
  scratch.pair_weights.resize(pairs * static_cast<std::size_t>(taps) * 8);
  scratch.pair_offsets.resize(2 * pairs);
  for (std::size_t pair = 0; pair < pairs; ++pair) {
    const std::size_t o0 = 2 * pair, o1 = std::min(o0 + 1, static_cast<std::size_t>(size) - 1);
    float* pw = &scratch.pair_weights[pair * static_cast<std::size_t>(taps) * 8];
    scratch.pair_offsets[2 * pair] = (th.first[o0] - x_lo) * 3;
    scratch.pair_offsets[2 * pair + 1] = (th.first[o1] - x_lo) * 3;
    for (int k = 0; k < taps; ++k, pw += 8) {
      const float w0 = th.weights[o0 * static_cast<std::size_t>(th.max_taps) + static_cast<std::size_t>(k)];
      const float w1 = th.weights[o1 * static_cast<std::size_t>(th.max_taps) + static_cast<std::size_t>(k)];
      for (int c = 0; c < 4; ++c) {
        pw[c] = w0;
        pw[4 + c] = w1;
      }
    }
  }
  scratch.line.resize(pairs * 8);
  float a[3], b[3];
  for (int c = 0; c < 3; ++c) {
    a[c] = 1.0f / (255.0f * options.std[static_cast<std::size_t>(c)]);
    b[c] = -options.mean[static_cast<std::size_t>(c)] / options.std[static_cast<std::size_t>(c)];
  }
  const Normalise norm{a[0] + v8f{}, a[1] + v8f{}, a[2] + v8f{}, b[0] + v8f{}, b[1] + v8f{}, b[2] + v8f{}};
  const int pairs_n = static_cast<int>(pairs);
  const bool bytes = options.format == SampleFormat::u8_hwc;
  float* const out = static_cast<float*>(out_bytes);
  unsigned char* const out_u8 = static_cast<unsigned char*>(out_bytes);
  const std::size_t plane = static_cast<std::size_t>(size) * size;
  float* const line = scratch.line.data();
  for (int oy = 0; oy < size; ++oy) {
    const unsigned char* s0 = src + static_cast<std::size_t>(tv.first[static_cast<std::size_t>(oy)]) * src_stride;
    const float* wv = &tv.weights[static_cast<std::size_t>(oy) * tv.max_taps];
    const int nv = tv.count[static_cast<std::size_t>(oy)];
    switch (nv) {  // the common tap counts unrolled (downscales up to about 2.5x)
      case 1: vertical_pass<Arith, 1>(s0, src_stride, wv, nv, len, row); break;
      case 2: vertical_pass<Arith, 2>(s0, src_stride, wv, nv, len, row); break;
      case 3: vertical_pass<Arith, 3>(s0, src_stride, wv, nv, len, row); break;
      case 4: vertical_pass<Arith, 4>(s0, src_stride, wv, nv, len, row); break;
      case 5: vertical_pass<Arith, 5>(s0, src_stride, wv, nv, len, row); break;
      case 6: vertical_pass<Arith, 6>(s0, src_stride, wv, nv, len, row); break;
      default: vertical_pass<Arith, 0>(s0, src_stride, wv, nv, len, row);
    }
    const int* offsets = scratch.pair_offsets.data();
    const float* pw = scratch.pair_weights.data();
    if (bytes) {
      switch (taps) {  // the common tap counts unrolled (downscales up to about 3.5x)
        case 2: horizontal_pass<Arith, 2>(row, offsets, 0, pairs_n, taps, pw, line); break;
        case 3: horizontal_pass<Arith, 3>(row, offsets, 0, pairs_n, taps, pw, line); break;
        case 4: horizontal_pass<Arith, 4>(row, offsets, 0, pairs_n, taps, pw, line); break;
        case 5: horizontal_pass<Arith, 5>(row, offsets, 0, pairs_n, taps, pw, line); break;
        case 6: horizontal_pass<Arith, 6>(row, offsets, 0, pairs_n, taps, pw, line); break;
        case 7: horizontal_pass<Arith, 7>(row, offsets, 0, pairs_n, taps, pw, line); break;
        case 8: horizontal_pass<Arith, 8>(row, offsets, 0, pairs_n, taps, pw, line); break;
        default: horizontal_pass<Arith, 0>(row, offsets, 0, pairs_n, taps, pw, line);
      }
      unsigned char* out_row = out_u8 + static_cast<std::size_t>(oy) * size * 3;
      const int vectorised = flip ? round_row_hwc<true>(line, size, out_row) : round_row_hwc<false>(line, size, out_row);
      for (int ox = vectorised; ox < size; ++ox) {  // the last size % 4 pixels
        const int d = flip ? size - 1 - ox : ox;
        for (int c = 0; c < 3; ++c) {
          out_row[3 * d + c] = static_cast<unsigned char>(std::clamp(line[4 * ox + c] + 0.5f, 0.0f, 255.0f));
        }
      }
      continue;
    }
    float* out_row = out + static_cast<std::size_t>(oy) * size;
    // Whole groups of eight pixels fused, then the last size % 8 pixels through `line`.
    int vectorised = 0;
#define KILN_ROW_CHW(T)                                                                          \
  vectorised = horizontal_row_chw<Arith, T>(row, offsets, size, taps, pw, flip, norm, plane, out_row); \
  horizontal_pass<Arith, T>(row, offsets, vectorised / 2, pairs_n, taps, pw, line)
    switch (taps) {
      case 2: KILN_ROW_CHW(2); break;
      case 3: KILN_ROW_CHW(3); break;
      case 4: KILN_ROW_CHW(4); break;
      case 5: KILN_ROW_CHW(5); break;
      case 6: KILN_ROW_CHW(6); break;
      case 7: KILN_ROW_CHW(7); break;
      case 8: KILN_ROW_CHW(8); break;
      default: KILN_ROW_CHW(0);
    }
#undef KILN_ROW_CHW
    for (int c = 0; c < 3; ++c) {
      float* out_c = out_row + static_cast<std::size_t>(c) * plane;
      for (int ox = vectorised; ox < size; ++ox) {
        out_c[flip ? size - 1 - ox : ox] = Arith::madd(line[4 * ox + c], a[c], b[c]);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::imagenet
