// Pooling and image input: max/average pooling forward and backward, global average pooling,
// and normalize_image (u8 HWC pixels to normalised float NCHW/NHWC activations).
//
// Window (p, q) of a pooling covers input pixels
//   h = p * stride_h - pad_h + r,  w = q * stride_w - pad_w + s   for r < kernel_h, s < kernel_w
// and only those inside the image take part (for max pooling, padding is never the maximum).
// Average pooling divides by the whole window, padding included (PyTorch's count_include_pad),
// and output sizes are floor divisions (no ceil_mode), as kiln/ops.hpp says.
#include <limits>

#include "image.hpp"
#include "naive_backend.hpp"

namespace kiln::naive {
namespace {

/// The plan keeps the checked descriptor (a fast backend keeps its primitives here too).
struct PoolPlan final : OpPlan {
  explicit PoolPlan(const Pool2dDesc& d) : desc(d) {}
  Pool2dDesc desc;
};

/// Calls f(h, w) for every in-image pixel of window (p, q), in row order.
template <class F>
void for_each_in_window(const Pool2dDesc& d, std::int64_t p, std::int64_t q, F&& f) {
  for (std::int64_t r = 0; r < d.kernel_h; ++r) {
    const std::int64_t h = p * d.stride_h - d.pad_h + r;
    if (h < 0 || h >= d.h) continue;
    for (std::int64_t s = 0; s < d.kernel_w; ++s) {
      const std::int64_t w = q * d.stride_w - d.pad_w + s;
      if (w < 0 || w >= d.w) continue;
      f(h, w);
    }
  }
}

/// Calls f(n, c, p, q) for every output element of a pooling.
template <class F>
void for_each_output(const Pool2dDesc& d, F&& f) {
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t c = 0; c < d.c; ++c) {
      for (std::int64_t p = 0; p < d.out_h(); ++p) {
        for (std::int64_t q = 0; q < d.out_w(); ++q) f(n, c, p, q);
      }
    }
  }
}

}  // namespace

std::shared_ptr<OpPlan> NaiveBackend::plan_pool2d(const Pool2dDesc& desc) {
  const OpCheck check(Op::pool2d_forward);
  sdk::check_pool2d_desc(check, desc);  // positive sizes, padding at most half the kernel, non-empty output
  require_f32(Op::pool2d_forward, desc.dtype);
  return std::make_shared<PoolPlan>(desc);
}

void NaiveBackend::pool2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x) {
  const OpCheck check(Op::pool2d_forward);
  const Pool2dDesc& d = plan_as<PoolPlan>(check, plan, "plan_pool2d").desc;
  // Image reads each operand through its own layout tag, so mixed layouts would cost nothing;
  // the contract promises one layout per call, and refusing others keeps to it.
  sdk::check_pool2d_forward(check, d, sdk::MixedLayouts::refused, y, x);
  const Image in(x), out(y);
  const double window = static_cast<double>(d.kernel_h * d.kernel_w);
  for_each_output(d, [&](auto n, auto c, auto p, auto q) {
    if (d.kind == Pool2dDesc::Kind::max) {
      float best = -std::numeric_limits<float>::infinity();
      for_each_in_window(d, p, q, [&](auto h, auto w) {
        if (in(n, c, h, w) > best) best = in(n, c, h, w);
      });
      out(n, c, p, q) = best;
    } else {
      double sum = 0.0;
      for_each_in_window(d, p, q, [&](auto h, auto w) { sum += in(n, c, h, w); });
      out(n, c, p, q) = static_cast<float>(sum / window);
    }
  });
}

void NaiveBackend::pool2d_backward(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                   const Tensor& y) {
  const OpCheck check(Op::pool2d_backward);
  const Pool2dDesc& d = plan_as<PoolPlan>(check, plan, "plan_pool2d").desc;
  // Requires x and y for max pooling; average pooling may pass undefined tensors.
  sdk::check_pool2d_backward(check, d, sdk::MixedLayouts::refused, dx, dy, x, y);
  const Image grad_out(dy), grad_in(dx);
  // Overlapping windows (stride < kernel) send several gradients to one pixel: sum them.
  ImageSums sums(grad_in);
  if (d.kind == Pool2dDesc::Kind::max) {
    // Each window's gradient goes to its maximum, found again in x: the first one in row order
    // (with ties, the first; y is not needed to find it).
    const Image in(x);
    for_each_output(d, [&](auto n, auto c, auto p, auto q) {
      std::int64_t best_h = -1, best_w = -1;
      for_each_in_window(d, p, q, [&](auto h, auto w) {
        if (best_h < 0 || in(n, c, h, w) > in(n, c, best_h, best_w)) best_h = h, best_w = w;
      });
      sums(n, c, best_h, best_w) += grad_out(n, c, p, q);
    });
  } else {
    const double window = static_cast<double>(d.kernel_h * d.kernel_w);
    for_each_output(d, [&](auto n, auto c, auto p, auto q) {
      for_each_in_window(d, p, q, [&](auto h, auto w) { sums(n, c, h, w) += grad_out(n, c, p, q) / window; });
    });
  }
  sums.store(grad_in);
}

void NaiveBackend::global_avgpool_forward(const Tensor& y, const Tensor& x) {
  const OpCheck check(Op::global_avgpool_forward);
  sdk::check_global_avgpool_forward(check, y, x);  // x (N, C, H, W) either layout, y (N, C) row-major
  require_f32(Op::global_avgpool_forward, x.dtype());
  const Image in(x);
  float* out = floats(y);
  const double pixels = static_cast<double>(in.h() * in.w());
  for (std::int64_t n = 0; n < in.n(); ++n) {
    for (std::int64_t c = 0; c < in.c(); ++c) {
      double sum = 0.0;
      for (std::int64_t h = 0; h < in.h(); ++h) {
        for (std::int64_t w = 0; w < in.w(); ++w) sum += in(n, c, h, w);
      }
      out[n * in.c() + c] = static_cast<float>(sum / pixels);
    }
  }
}

void NaiveBackend::global_avgpool_backward(const Tensor& dx, const Tensor& dy) {
  const OpCheck check(Op::global_avgpool_backward);
  sdk::check_global_avgpool_backward(check, dx, dy);
  require_f32(Op::global_avgpool_backward, dy.dtype());
  const Image grad_in(dx);
  const float* grad_out = floats(dy);
  const double pixels = static_cast<double>(grad_in.h() * grad_in.w());
  // Every pixel contributed 1 / (H W) of the mean, so each gets that share of its gradient.
  for (std::int64_t n = 0; n < grad_in.n(); ++n) {
    for (std::int64_t c = 0; c < grad_in.c(); ++c) {
      const float share = static_cast<float>(grad_out[n * grad_in.c() + c] / pixels);
      for (std::int64_t h = 0; h < grad_in.h(); ++h) {
        for (std::int64_t w = 0; w < grad_in.w(); ++w) grad_in(n, c, h, w) = share;
      }
    }
  }
}

void NaiveBackend::normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) {
  const OpCheck check(Op::normalize_image);
  sdk::check_normalize_image(check, dst, src, norm);  // src u8 (N, H, W, 3); every std > 0
  require_f32(Op::normalize_image, dst.dtype());
  const Image out(dst);
  const std::uint8_t* pixels = src.data_as<std::uint8_t>();
  // dst(n, c, h, w) = (pixel / 255 - mean[c]) / std[c], the pixel read from interleaved RGB.
  for (std::int64_t n = 0; n < out.n(); ++n) {
    for (std::int64_t c = 0; c < 3; ++c) {
      for (std::int64_t h = 0; h < out.h(); ++h) {
        for (std::int64_t w = 0; w < out.w(); ++w) {
          const double v = pixels[((n * out.h() + h) * out.w() + w) * 3 + c];
          out(n, c, h, w) = static_cast<float>((v / 255.0 - double{norm.mean[c]}) / double{norm.std[c]});
        }
      }
    }
  }
}

}  // namespace kiln::naive
