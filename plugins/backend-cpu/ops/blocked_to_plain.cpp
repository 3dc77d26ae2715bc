// Blocked -> plain f32 copy/add (see blocked_to_plain.hpp).
//
// oneDNN's blocked descriptor: element (x_0..x_{n-1}) lies at
//   offset0 + sum_d (x_d / B_d) * strides[d] + inner offset,
// where B_d is the product of dim d's inner blocks and the inner offset places each inner block
// digit of x_d at the stride of its block inside the innermost tile (the product of the sizes of
// the blocks after it). Both parts are sums of one term per dim, so one table per dim holds the
// offset of every index and an element's offset is the sum of its dims' entries.
#include "ops/blocked_to_plain.hpp"

#include <algorithm>
#include <stdexcept>

#include "ops/dense_row_major.hpp"
#include "parallel.hpp"

namespace kiln::cpu {

using dt = dnnl::memory::data_type;

bool BlockedToPlain::handles(const dnnl::memory::desc& blocked, const dnnl::memory::desc& plain) {
  const onednn::Blocking b = onednn::blocking(blocked), p = onednn::blocking(plain);
  if (b.data_type != dt::f32 || p.data_type != dt::f32) return false;
  if (b.ndims != p.ndims || (b.ndims != 4 && b.ndims != 5)) return false;
  if (!std::equal(b.dims, b.dims + b.ndims, p.dims)) return false;
  if (!b.blocked || b.inner_nblks == 0) return false;
  return dense_row_major(p);
}

BlockedToPlain::BlockedToPlain(const dnnl::memory::desc& blocked) {
  const onednn::Blocking b = onednn::blocking(blocked);
  if (!b.blocked || b.data_type != dt::f32 || (b.ndims != 4 && b.ndims != 5)) {
    throw std::invalid_argument("BlockedToPlain: needs a 4-D or 5-D f32 blocked descriptor");
  }
  const int nd = b.ndims, nblks = b.inner_nblks;
  dims_.assign(b.dims, b.dims + nd);
  // block_stride[k]: the stride of inner block k inside the innermost tile.
  std::vector<std::int64_t> block_stride(static_cast<std::size_t>(nblks));
  std::int64_t s = 1;
  for (int k = nblks - 1; k >= 0; --k) {
    block_stride[static_cast<std::size_t>(k)] = s;
    s *= b.inner_blks[k];
  }
  offset_.resize(static_cast<std::size_t>(nd));
  for (int d = 0; d < nd; ++d) {
    std::int64_t outer_block = 1;  // B_d
    for (int k = 0; k < nblks; ++k) {
      if (b.inner_idxs[k] == d) outer_block *= b.inner_blks[k];
    }
    std::vector<std::int64_t>& table = offset_[static_cast<std::size_t>(d)];
    table.resize(static_cast<std::size_t>(dims_[static_cast<std::size_t>(d)]));
    for (std::int64_t x = 0; x < dims_[static_cast<std::size_t>(d)]; ++x) {
      std::int64_t off = (x / outer_block) * b.strides[d];
      // Digits of x within its block, least significant (the last of d's blocks) first.
      std::int64_t rest = x % outer_block;
      for (int k = nblks - 1; k >= 0; --k) {
        if (b.inner_idxs[k] != d) continue;
        off += (rest % b.inner_blks[k]) * block_stride[static_cast<std::size_t>(k)];
        rest /= b.inner_blks[k];
      }
      table[static_cast<std::size_t>(x)] = off;
    }
    if (d == 0) {
      for (std::int64_t& o : table) o += b.offset0;  // counted once, in the first dim's table
    }
    // The O and I dims' blocks make the tiles: one tile of source is B_O * B_I * H * W elements.
    if (d == nd - 4) tile_o_ = outer_block;
    if (d == nd - 3) tile_i_ = outer_block;
  }
}

void BlockedToPlain::run(const float* src, float* dst, bool accumulate) const {
  const std::size_t nd = dims_.size();
  const std::int64_t groups = nd == 5 ? dims_[0] : 1;
  const std::int64_t O = dims_[nd - 4], I = dims_[nd - 3], H = dims_[nd - 2], W = dims_[nd - 1];
  const std::vector<std::int64_t>* g_off = nd == 5 ? &offset_[0] : nullptr;
  const std::vector<std::int64_t>& o_off = offset_[nd - 4];
  const std::vector<std::int64_t>& i_off = offset_[nd - 3];
  // The spatial offsets flattened (h * W + w -> offset), so the innermost loop is one gather.
  const std::int64_t hw = H * W;
  std::vector<std::int64_t> hw_off(static_cast<std::size_t>(hw));
  for (std::int64_t h = 0; h < H; ++h) {
    for (std::int64_t w = 0; w < W; ++w) {
      hw_off[static_cast<std::size_t>(h * W + w)] =
          offset_[nd - 2][static_cast<std::size_t>(h)] + offset_[nd - 1][static_cast<std::size_t>(w)];
    }
  }
  const std::int64_t* const sp = hw_off.data();
  const std::int64_t* const io = i_off.data();
  const std::int64_t o_tiles = (O + tile_o_ - 1) / tile_o_;

  // One unit of work: the output rows of one O tile of one group, walked I tile by I tile, so
  // the source of one (O tile, I tile) pair (B_O * B_I * H * W elements) is read while in L1.
  auto tile = [&](std::int64_t unit) {
    const std::int64_t g = unit / o_tiles, ot = unit % o_tiles;
    const std::int64_t g_base = g_off ? (*g_off)[static_cast<std::size_t>(g)] : 0;
    const std::int64_t o_end = std::min(O, (ot + 1) * tile_o_);
    for (std::int64_t i0 = 0; i0 < I; i0 += tile_i_) {
      const std::int64_t i_end = std::min(I, i0 + tile_i_);
      for (std::int64_t o = ot * tile_o_; o < o_end; ++o) {
        const float* s = src + g_base + o_off[static_cast<std::size_t>(o)];
        float* row = dst + ((g * O + o) * I) * hw;
        if (hw == 1) {  // 1x1 kernels: the gather runs along I
          if (accumulate) {
            for (std::int64_t i = i0; i < i_end; ++i) row[i] += s[io[i]];
          } else {
            for (std::int64_t i = i0; i < i_end; ++i) row[i] = s[io[i]];
          }
          continue;
        }
        for (std::int64_t i = i0; i < i_end; ++i) {
          const float* si = s + io[i];
          float* d = row + i * hw;
          if (accumulate) {
            for (std::int64_t p = 0; p < hw; ++p) d[p] += si[sp[p]];
          } else {
            for (std::int64_t p = 0; p < hw; ++p) d[p] = si[sp[p]];
          }
        }
      }
    }
  };

  const std::int64_t units = groups * o_tiles;
  if (groups * O * I * hw > kParallelMinElements) {
#pragma omp parallel for schedule(static)
    for (std::int64_t u = 0; u < units; ++u) tile(u);
  } else {
    for (std::int64_t u = 0; u < units; ++u) tile(u);
  }
}

}  // namespace kiln::cpu
