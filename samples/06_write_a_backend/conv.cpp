// 2-D convolution: forward, backward-data and backward-filter, by the definition.
//
// Shapes: x (N, C, H, W), w (K, C/groups, R, S) OIHW row-major, y (N, K, P, Q) with
//   P = (H + 2 pad_h - dilation_h (R - 1) - 1) / stride_h + 1   (and Q alike)
// Output pixel (p, q) of filter k sees input pixel
//   h = p * stride_h - pad_h + r * dilation_h,  w = q * stride_w - pad_w + s * dilation_w
// for every tap (r, s) that lands inside the image (padding reads as zero), over the C/groups
// input channels of k's group. So the three directions are one loop nest over (output, tap)
// pairs, for_each_tap below, and only the line inside differs:
//   forward          y(n, k, p, q)   += x(n, c, h, w)  * w(k, c', r, s)
//   backward data    dx(n, c, h, w)  += dy(n, k, p, q) * w(k, c', r, s)
//   backward filter  dw(k, c', r, s) += dy(n, k, p, q) * x(n, c, h, w)
// (c' = c's index within its group). Each sums in double (ImageSums) and stores once.
// x, y, dx and dy may each be row_major or nhwc, even within one call (the first layer reads
// NCHW input and may write another layout): Image reads each through its own tag. The weights
// and dw are 4-D row-major, which Image reads too.
#include "image.hpp"
#include "naive_backend.hpp"

namespace kiln::naive {
namespace {

/// What a plan is for: a fast backend keeps its chosen algorithm, primitives and workspaces
/// here, made once per layer and shape. The loops need only the checked descriptor.
struct ConvPlan final : OpPlan {
  explicit ConvPlan(const Conv2dDesc& d) : desc(d) {}
  Conv2dDesc desc;
};

/// Calls f(n, k, p, q, c, c_in_group, r, s, h, w) for every output pixel and filter tap whose
/// input pixel (h, w) is inside the image.
template <class F>
void for_each_tap(const Conv2dDesc& d, F&& f) {
  const std::int64_t k_per_group = d.k / d.groups, c_per_group = d.c / d.groups;
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t k = 0; k < d.k; ++k) {
      const std::int64_t group = k / k_per_group;
      for (std::int64_t p = 0; p < d.out_h(); ++p) {
        for (std::int64_t q = 0; q < d.out_w(); ++q) {
          for (std::int64_t cg = 0; cg < c_per_group; ++cg) {
            for (std::int64_t r = 0; r < d.r; ++r) {
              const std::int64_t h = p * d.stride_h - d.pad_h + r * d.dilation_h;
              if (h < 0 || h >= d.h) continue;  // in the padding: contributes zero
              for (std::int64_t s = 0; s < d.s; ++s) {
                const std::int64_t w = q * d.stride_w - d.pad_w + s * d.dilation_w;
                if (w < 0 || w >= d.w) continue;
                f(n, k, p, q, group * c_per_group + cg, cg, r, s, h, w);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

std::shared_ptr<OpPlan> NaiveBackend::plan_conv2d(const Conv2dDesc& desc) {
  const OpCheck check(Op::conv2d_forward);
  sdk::check_conv2d_desc(check, desc);  // positive sizes, channels divisible by groups, non-empty output
  require_f32(Op::conv2d_forward, desc.dtype);
  return std::make_shared<ConvPlan>(desc);
}

// The op checks below also hold each operand to f32 or the plan's dtype, and plans are f32 only,
// so no op of a plan needs its own dtype test.

void NaiveBackend::conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) {
  const OpCheck check(Op::conv2d_forward);
  const Conv2dDesc& d = plan_as<ConvPlan>(check, plan, "plan_conv2d").desc;
  sdk::check_conv2d_forward(check, d, y, x, w);
  const Image in(x), out(y), weight(w);
  ImageSums sums(out);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto cg, auto r, auto s, auto h, auto wi) {
    sums(n, k, p, q) += double{in(n, c, h, wi)} * weight(k, cg, r, s);
  });
  sums.store(out);
}

void NaiveBackend::conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& w) {
  const OpCheck check(Op::conv2d_backward_data);
  const Conv2dDesc& d = plan_as<ConvPlan>(check, plan, "plan_conv2d").desc;
  sdk::check_conv2d_backward_data(check, d, dx, dy, w);
  const Image grad_out(dy), grad_in(dx), weight(w);
  // An activation gradient, overwritten: every input pixel gets its sum (zero if no tap saw it).
  ImageSums sums(grad_in);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto cg, auto r, auto s, auto h, auto wi) {
    sums(n, c, h, wi) += double{grad_out(n, k, p, q)} * weight(k, cg, r, s);
  });
  sums.store(grad_in);
}

void NaiveBackend::conv2d_backward_filter(OpPlan& plan, const Tensor& dw, const Tensor& dy, const Tensor& x,
                                          Accumulate acc) {
  const OpCheck check(Op::conv2d_backward_filter);
  const Conv2dDesc& d = plan_as<ConvPlan>(check, plan, "plan_conv2d").desc;
  sdk::check_conv2d_backward_filter(check, d, dw, dy, x);
  const Image grad_out(dy), in(x), weight_grad(dw);
  // A parameter gradient (f32 whatever the compute dtype): Accumulate::yes adds to what is there.
  ImageSums sums(weight_grad, /*start_from_it=*/acc == Accumulate::yes);
  for_each_tap(d, [&](auto n, auto k, auto p, auto q, auto c, auto cg, auto r, auto s, auto h, auto wi) {
    sums(k, cg, r, s) += double{grad_out(n, k, p, q)} * in(n, c, h, wi);
  });
  sums.store(weight_grad);
}

}  // namespace kiln::naive
