// Max pooling on channels-last f32, bf16 and f16 tensors (see maxpool_nhwc.hpp).
#include "ops/maxpool_nhwc.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ops/bf16_convert.hpp"
#include "ops/f16_convert.hpp"

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

/// Elements of one image of x (and dx), and of y (and dy and the argmax).
std::int64_t input_image(const Pool2dDesc& d) { return d.h * d.w * d.c; }
std::int64_t output_image(const Pool2dDesc& d) { return d.out_h() * d.out_w() * d.c; }

/// Output row `row` (= image n * out_h + p) of the forward: y's and argmax's row from x.
void forward_row(const Pool2dDesc& d, std::int64_t row, const float* x, float* y, std::uint8_t* argmax) {
  const std::int64_t ph = d.out_h(), qw = d.out_w(), c = d.c;
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

/// One image of the backward: dx = 0, then each output's gradient added at its argmax tap. Every
/// tap adds its row, zero where another tap holds the maximum, so the loop has no branch per
/// channel; an input pixel's gradients are summed in output order.
void backward_image(const Pool2dDesc& d, const float* dy, const std::uint8_t* argmax, float* dx) {
  const std::int64_t ph = d.out_h(), qw = d.out_w(), c = d.c;
  std::fill(dx, dx + input_image(d), 0.0f);
  for (std::int64_t p = 0; p < ph; ++p) {
    for (std::int64_t q = 0; q < qw; ++q) {
      const float* g = dy + (p * qw + q) * c;
      const std::uint8_t* arg = argmax + (p * qw + q) * c;
      for_each_tap(d, p, q, [&](std::uint8_t tap, std::int64_t h, std::int64_t w) {
        float* out = dx + (h * d.w + w) * c;
#pragma omp simd
        for (std::int64_t i = 0; i < c; ++i) out[i] += arg[i] == tap ? g[i] : 0.0f;
      });
    }
  }
}

/// The 16-bit storage formats' conversions (bit-identical to kiln/sdk/half.hpp).
struct Conversions {
  void (*widen)(const std::uint16_t*, float*, std::size_t) noexcept;
  void (*narrow)(const float*, std::uint16_t*, std::size_t) noexcept;
};

Conversions conversions_for(DType dtype) {
  if (dtype == DType::bf16) return {bf16_to_f32_n, f32_to_bf16_n};
  return {f16_to_f32_n, f32_to_f16_n};
}

/// Runs f(n, in32, out32) for every image n, whole images per thread of the OpenMP team, with
/// the thread's share of `scratch`: an f32 input image (h*w*c) and an f32 output image.
template <class PerImage>
void for_each_image_in_scratch(const Pool2dDesc& d, float* scratch, PerImage&& f) {
  const std::int64_t in_image = input_image(d), out_image = output_image(d);
#pragma omp parallel
  {
    float* in32 = scratch + static_cast<std::size_t>(omp_get_thread_num()) * static_cast<std::size_t>(in_image + out_image);
    float* out32 = in32 + in_image;
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < d.n; ++n) f(n, in32, out32);
  }
}

}  // namespace

bool maxpool_nhwc_fits(const Pool2dDesc& d) {
  return d.kind == Pool2dDesc::Kind::max && d.kernel_h * d.kernel_w <= 255;
}

void maxpool_nhwc_forward(const Pool2dDesc& d, const float* x, float* y, std::uint8_t* argmax) {
  // One output row of one image per iteration: rows are independent.
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < d.n * d.out_h(); ++row) forward_row(d, row, x, y, argmax);
}

void maxpool_nhwc_backward(const Pool2dDesc& d, const float* dy, const std::uint8_t* argmax, float* dx) {
  // Windows overlap (stride below the kernel), so two outputs may add into one input pixel: each
  // thread takes whole images, which share nothing (one image runs on one thread).
  const std::int64_t in_image = input_image(d), out_image = output_image(d);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < d.n; ++n) {
    backward_image(d, dy + n * out_image, argmax + n * out_image, dx + n * in_image);
  }
}

std::size_t maxpool_nhwc_16_scratch_floats(const Pool2dDesc& d, int threads) {
  return static_cast<std::size_t>(threads) * static_cast<std::size_t>(input_image(d) + output_image(d));
}

void maxpool_nhwc_forward_16(const Pool2dDesc& d, DType dtype, const std::uint16_t* x, std::uint16_t* y,
                             std::uint8_t* argmax, float* scratch) {
  const Conversions convert = conversions_for(dtype);
  Pool2dDesc one = d;
  one.n = 1;
  // Pooled in f32; the maximum is one of the inputs, so narrowing it back is exact.
  const std::int64_t in_image = input_image(d), out_image = output_image(d);
  for_each_image_in_scratch(d, scratch, [&](std::int64_t n, float* x32, float* y32) {
    convert.widen(x + n * in_image, x32, static_cast<std::size_t>(in_image));
    for (std::int64_t p = 0; p < d.out_h(); ++p) forward_row(one, p, x32, y32, argmax + n * out_image);
    convert.narrow(y32, y + n * out_image, static_cast<std::size_t>(out_image));
  });
}

void maxpool_nhwc_backward_16(const Pool2dDesc& d, DType dtype, const std::uint16_t* dy, const std::uint8_t* argmax,
                              std::uint16_t* dx, float* scratch) {
  const Conversions convert = conversions_for(dtype);
  // Sums in f32, rounded once per input value, as the f32 path computes them.
  const std::int64_t in_image = input_image(d), out_image = output_image(d);
  for_each_image_in_scratch(d, scratch, [&](std::int64_t n, float* dx32, float* dy32) {
    convert.widen(dy + n * out_image, dy32, static_cast<std::size_t>(out_image));
    backward_image(d, dy32, argmax + n * out_image, dx32);
    convert.narrow(dx32, dx + n * in_image, static_cast<std::size_t>(in_image));
  });
}

}  // namespace kiln::cpu
