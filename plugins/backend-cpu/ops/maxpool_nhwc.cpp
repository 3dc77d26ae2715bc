// Max pooling on channels-last f32 tensors (see maxpool_nhwc.hpp).
#include "ops/maxpool_nhwc.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace kiln::cpu {
namespace {

/// Calls tap_at(tap, h, w) for each tap of output (p, q)'s window that lies inside the image, in
/// window order (tap = r * kernel_w + s; h, w the input pixel).
template <class TapAt>
void for_each_tap(const Pool2dDesc& d, std::int64_t p, std::int64_t q, TapAt&& tap_at) {
  const std::int64_t h0 = p * d.stride_h - d.pad_h, w0 = q * d.stride_w - d.pad_w;
  for (std::int64_t r = 0; r < d.kernel_h; ++r) {
    const std::int64_t h = h0 + r;
    if (h < 0 || h >= d.h) continue;
    for (std::int64_t s = 0; s < d.kernel_w; ++s) {
      const std::int64_t w = w0 + s;
      if (w >= 0 && w < d.w) tap_at(static_cast<std::uint8_t>(r * d.kernel_w + s), h, w);
    }
  }
}

/// Folds one tap into the running maximum of one output pixel's C channels: taken where the
/// tap is larger, or NaN (a NaN then stays unless a later NaN replaces it: `v > best` is false
/// against a NaN best).
void fold_tap(const float* __restrict in, float* __restrict best, std::uint8_t* __restrict arg, std::uint8_t tap,
              std::int64_t c) {
#pragma omp simd
  for (std::int64_t i = 0; i < c; ++i) {
    const float v = in[i];
    const bool take = v > best[i] || v != v;
    best[i] = take ? v : best[i];
    arg[i] = take ? tap : arg[i];
  }
}

}  // namespace

bool maxpool_nhwc_fits(const Pool2dDesc& d) {
  return d.kind == Pool2dDesc::Kind::max && d.kernel_h * d.kernel_w <= 255;
}

void maxpool_nhwc_forward(const Pool2dDesc& d, const float* x, float* y, std::uint8_t* argmax) {
  const std::int64_t ph = d.out_h(), qw = d.out_w(), c = d.c;
  // One output row of one image per iteration: rows are independent.
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < d.n * ph; ++row) {
    const std::int64_t n = row / ph, p = row % ph;
    for (std::int64_t q = 0; q < qw; ++q) {
      float* best = y + (row * qw + q) * c;
      std::uint8_t* arg = argmax + (row * qw + q) * c;
      bool first = true;
      // Every window overlaps the image (padding is at most half the kernel, check_pool2d_desc),
      // so some tap starts the maximum.
      for_each_tap(d, p, q, [&](std::uint8_t tap, std::int64_t h, std::int64_t w) {
        const float* in = x + ((n * d.h + h) * d.w + w) * c;
        if (first) {  // the first tap in the image starts the maximum
          std::memcpy(best, in, static_cast<std::size_t>(c) * sizeof(float));
          std::fill(arg, arg + c, tap);
          first = false;
        } else {
          fold_tap(in, best, arg, tap, c);
        }
      });
    }
  }
}

void maxpool_nhwc_backward(const Pool2dDesc& d, const float* dy, const std::uint8_t* argmax, float* dx) {
  const std::int64_t ph = d.out_h(), qw = d.out_w(), c = d.c;
  // Windows overlap (stride below the kernel), so two outputs may add into one input pixel: each
  // thread takes whole images, which share nothing (one image runs on one thread). Every tap adds
  // its row, zero where another tap holds the maximum, so the loop has no branch per channel; an
  // input pixel's gradients are summed in output order.
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < d.n; ++n) {
    float* image = dx + n * d.h * d.w * c;
    std::fill(image, image + d.h * d.w * c, 0.0f);
    for (std::int64_t p = 0; p < ph; ++p) {
      for (std::int64_t q = 0; q < qw; ++q) {
        const float* g = dy + ((n * ph + p) * qw + q) * c;
        const std::uint8_t* arg = argmax + ((n * ph + p) * qw + q) * c;
        for_each_tap(d, p, q, [&](std::uint8_t tap, std::int64_t h, std::int64_t w) {
          float* out = image + (h * d.w + w) * c;
#pragma omp simd
          for (std::int64_t i = 0; i < c; ++i) out[i] += arg[i] == tap ? g[i] : 0.0f;
        });
      }
    }
  }
}

}  // namespace kiln::cpu
