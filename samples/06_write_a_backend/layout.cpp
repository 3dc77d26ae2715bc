// convert_layout: the same logical (N, C, H, W) elements, rearranged into dst's layout tag
// (row_major NCHW <-> nhwc; an equal layout is a plain copy). How a layer hands an activation to
// code that needs one order, e.g. Flatten's PyTorch (C, H, W) feature order after channels-last
// convolutions. With Image this is the definition itself: dst(n, c, h, w) = src(n, c, h, w).
#include "image.hpp"
#include "naive_backend.hpp"

namespace kiln::naive {

void NaiveBackend::convert_layout(const Tensor& dst, const Tensor& src) {
  const OpCheck check(Op::convert_layout);
  sdk::check_convert_layout(check, dst, src);  // 4-D, same dtype and shape, not the same memory
  require_f32(Op::convert_layout, src.dtype());
  const Image from(src), to(dst);
  for (std::int64_t n = 0; n < from.n(); ++n) {
    for (std::int64_t c = 0; c < from.c(); ++c) {
      for (std::int64_t h = 0; h < from.h(); ++h) {
        for (std::int64_t w = 0; w < from.w(); ++w) to(n, c, h, w) = from(n, c, h, w);
      }
    }
  }
}

}  // namespace kiln::naive
