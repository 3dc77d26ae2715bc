// convert_layout: dst = src's logical (N, C, H, W) elements in dst's layout (NCHW <-> NHWC), f32,
// bf16 or f16. Per image this is a transpose of a (C, HW) matrix into (HW, C) or back; the bits
// are moved, never converted, so only the element size matters. The transpose walks 32 x 32
// tiles so both the rows read and the rows written stay in L1; images and tile rows are split
// across threads when the tensor is large.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu_backend.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {
namespace {

constexpr std::int64_t kTile = 32;

/// out (cols, rows) = in (rows, cols)^T for `images` consecutive matrices.
template <class Bits>
void transpose_images(Bits* out, const Bits* in, std::int64_t images, std::int64_t rows, std::int64_t cols) {
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
  const std::int64_t tasks = images * row_tiles;
  const auto task = [&](std::int64_t t) {
    const std::int64_t img = t / row_tiles, r0 = (t % row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
    const Bits* a = in + img * rows * cols;
    Bits* b = out + img * rows * cols;
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t c1 = std::min(cols, c0 + kTile);
      for (std::int64_t r = r0; r < r1; ++r) {
        for (std::int64_t c = c0; c < c1; ++c) b[c * rows + r] = a[r * cols + c];
      }
    }
  };
  if (images * rows * cols > kParallelMinElements && tasks > 1) {
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < tasks; ++t) task(t);
  } else {
    for (std::int64_t t = 0; t < tasks; ++t) task(t);
  }
}

}  // namespace

void CpuBackend::convert_layout(const Tensor& dst, const Tensor& src) {
  sdk::check_convert_layout(OpCheck(Op::convert_layout), dst, src);
  if (dst.layout() == src.layout()) {
    std::memcpy(dst.data(), src.data(), src.bytes());
    return;
  }
  const std::int64_t n = src.dim(0), c = src.dim(1), hw = src.dim(2) * src.dim(3);
  // NCHW -> NHWC transposes each image's (C, HW) matrix; NHWC -> NCHW transposes (HW, C).
  const std::int64_t rows = src.layout() == Layout::nhwc ? hw : c;
  const std::int64_t cols = src.layout() == Layout::nhwc ? c : hw;
  use_our_threads();
  if (dtype_size(src.dtype()) == 4) {
    transpose_images(static_cast<std::uint32_t*>(dst.data()), static_cast<const std::uint32_t*>(src.data()), n,
                     rows, cols);
  } else {
    transpose_images(static_cast<std::uint16_t*>(dst.data()), static_cast<const std::uint16_t*>(src.data()), n,
                     rows, cols);
  }
}

}  // namespace kiln::cpu
