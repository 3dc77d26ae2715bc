// Plain -> blocked copy with f32/bf16 conversion (see plain_to_blocked.hpp).
//
// oneDNN's blocked descriptor: element (x_0..x_{n-1}) lies at
//   offset0 + sum_d (x_d / B_d) * strides[d] + inner offset,
// where B_d is the product of dim d's inner blocks and the inner offset (in [0, K), K the
// product of all inner blocks) places each inner block digit of x_d at the stride of its block
// inside the innermost tile. So the destination is a loop nest over the outer indices x_d / B_d
// (one level per dim, extent padded_dims[d] / B_d, in the source's order) around one
// contiguous K-element inner block, the same for every outer position up to a source offset:
// element k of the block reads the plain source at a fixed offset_[k] from the block's base and
// adds inner_index_[k][d] to the index of dim d. A position whose index reaches dims[d] in any
// dim is padding and gets a zero.
#include "ops/plain_to_blocked.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "ops/dense_row_major.hpp"
#include "ops/plain_to_blocked_avx512.hpp"
#include "parallel.hpp"

namespace kiln::cpu {

namespace {

namespace avx512 = plain_to_blocked_avx512;  // the vector kernels (plain_to_blocked_avx512.cpp)
using dt = dnnl::memory::data_type;
constexpr std::size_t kMaxDims = 5;

bool f32_or_bf16(dt t) { return t == dt::f32 || t == dt::bf16; }

// bf16 is carried as its 16 bits.
using bf16_bits = std::uint16_t;

/// f32 -> bf16 exactly as oneDNN rounds: zeros and denormals to a zero of the same sign, NaNs
/// truncated with the quiet bit set, everything else (infinities included) round to nearest even.
inline bf16_bits to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  const auto high = static_cast<bf16_bits>(u >> 16);
  const auto rounded = static_cast<bf16_bits>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  if (magnitude < 0x00800000u) return static_cast<bf16_bits>(high & 0x8000u);
  if (magnitude > 0x7f800000u) return static_cast<bf16_bits>(high | 0x0040u);
  return rounded;
}

inline float from_bf16(bf16_bits b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <class S, class D>
inline D convert(S s) {
  if constexpr (std::is_same_v<S, D>) {
    return s;
  } else if constexpr (std::is_same_v<S, float>) {
    return to_bf16(s);
  } else {
    return from_bf16(s);
  }
}

}  // namespace

WeightReorderCounts& weight_reorder_counts() {
  static WeightReorderCounts counts;
  return counts;
}

bool PlainToBlocked::handles(const dnnl::memory::desc& plain, const dnnl::memory::desc& blocked) {
  const onednn::Blocking p = onednn::blocking(plain), b = onednn::blocking(blocked);
  if (!f32_or_bf16(p.data_type) || !f32_or_bf16(b.data_type)) return false;
  if (p.ndims != b.ndims || (b.ndims != 4 && b.ndims != 5)) return false;
  if (!std::equal(b.dims, b.dims + b.ndims, p.dims)) return false;
  if (!b.blocked || b.inner_nblks == 0 || b.extra || b.offset0 != 0) {
    return false;
  }
  // Source offsets inside a block are 32-bit (the gathers' index width).
  std::int64_t padded = 1;
  for (int d = 0; d < b.ndims; ++d) padded *= b.padded_dims[d];
  if (padded >= (std::int64_t{1} << 31)) return false;
  return dense_row_major(p);
}

PlainToBlocked::PlainToBlocked(const dnnl::memory::desc& plain, const dnnl::memory::desc& blocked, bool simd)
    : src_type_(onednn::data_type(plain)), dst_type_(onednn::data_type(blocked)), simd_(simd && avx512::has_avx512()) {
  if (!handles(plain, blocked)) {
    throw std::invalid_argument(
        "PlainToBlocked: needs a dense row-major 4-D/5-D f32 or bf16 source and a blocked "
        "destination of the same dims");
  }
  const onednn::Blocking b = onednn::blocking(blocked);
  const int nd = b.ndims, nblks = b.inner_nblks;
  const auto ud = static_cast<std::size_t>(nd);
  dims_.assign(b.dims, b.dims + nd);
  std::vector<std::int64_t> plain_stride(ud);
  src_elements_ = 1;
  for (int d = nd - 1; d >= 0; --d) {
    plain_stride[static_cast<std::size_t>(d)] = src_elements_;
    src_elements_ *= b.dims[d];
  }

  // Outer levels (size-1 dims add nothing), sorted below.
  for (int d = 0; d < nd; ++d) {
    std::int64_t block = 1;  // B_d
    for (int k = 0; k < nblks; ++k) {
      if (b.inner_idxs[k] == d) block *= b.inner_blks[k];
    }
    const std::int64_t extent = b.padded_dims[d] / block;
    if (extent > 1) {
      levels_.push_back({extent, b.strides[d], block * plain_stride[static_cast<std::size_t>(d)], block, d});
    }
  }
  // Walked in the source's order: each block is contiguous in the destination wherever it
  // lands, while the source's rows are read front to back (in the destination's order a block
  // step of a transposed layout, BAcd16a16b, jumps 16 source rows: a TLB miss per row).
  std::stable_sort(levels_.begin(), levels_.end(), [](const Level& x, const Level& y) { return x.src_stride > y.src_stride; });
  if (levels_.empty()) levels_.push_back(Level{1, 0, 0, 0, 0});  // the tensor is one block

  // The inner block: element k's digits, block 0 most significant; digit j of block k adds
  // j * (product of the later blocks of the same dim) to that dim's index.
  std::int64_t k_total = 1;
  for (int k = 0; k < nblks; ++k) k_total *= b.inner_blks[k];
  offset_.resize(static_cast<std::size_t>(k_total));
  inner_index_.assign(static_cast<std::size_t>(k_total) * ud, 0);
  inner_span_.assign(ud, 0);
  for (std::int64_t e = 0; e < k_total; ++e) {
    std::int64_t rest = e;
    std::int64_t* index = &inner_index_[static_cast<std::size_t>(e) * ud];
    std::vector<std::int64_t> step(ud, 1);
    for (int k = nblks - 1; k >= 0; --k) {
      const auto d = static_cast<std::size_t>(b.inner_idxs[k]);
      index[d] += (rest % b.inner_blks[k]) * step[d];
      step[d] *= b.inner_blks[k];
      rest /= b.inner_blks[k];
    }
    std::int64_t off = 0;
    for (std::size_t d = 0; d < ud; ++d) {
      off += index[d] * plain_stride[d];
      inner_span_[d] = std::max(inner_span_[d], index[d]);
    }
    offset_[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(off);
    max_offset_ = std::max(max_offset_, off);
  }
  choose_kernel(blocked);
}

// Kernels. `gather` (any layout): element k of a block reads source offset_[k] (AVX-512 gathers
// or a scalar loop). The others are what ResNet-50's layers need on AVX-512, measured faster
// than both oneDNN 2.6's reorder and the gather:
//  - runs: the innermost block is a run of the source's contiguous elements (OIhw16i16o-like
//    layouts of 1x1 weights: 16 consecutive I): one copy per run.
//  - row_pairs: bf16 [O 8][I 16][O 2] blocks of 1x1 weights (ABcd8a16b2a, BAcd8a16b2a): two
//    source rows of 16 I interleaved.
//  - columns: an O block innermost (f32 Acdb16a..Acdb64a; bf16 AcdB16a2b..64a2b, where an I
//    pair is one 32-bit unit; any kernel size up to 4x4): 16x16 transposes of 32-bit units, 16
//    source rows (O) by up to 16 source columns at a time, each column stored as 16 units of a
//    block.
//  - i_rows: [O 16][I 16] blocks (f32 ABcd16a16b, BAcd16a16b) or bf16 [O 8][I 16][O 2]
//    (ABcd8a16b2a, BAcd8a16b2a) of 2x2..4x4 kernels: per O row (bf16: O row pair), a 16 I by HW
//    transpose whose column hw is that row's part of the block at spatial position hw.
// Blocks on the edge of the padded area use the scalar gather (runs, row_pairs) or zero rows
// (columns).
void PlainToBlocked::choose_kernel(const dnnl::memory::desc& blocked) {
  const onednn::Blocking b = onednn::blocking(blocked);
  const int nblks = b.inner_nblks;
  if (src_type_ != dst_type_) return;  // the conversions (not on ResNet-50's path) gather
  const bool f32 = dst_type_ == dt::f32;
  const auto k_total = static_cast<std::int64_t>(offset_.size());
  const bool one_by_one = b.ndims == 4 && b.dims[2] == 1 && b.dims[3] == 1;
  const std::int64_t hw = b.ndims == 4 ? b.dims[2] * b.dims[3] : 0;
  const bool unpadded = b.ndims == 4 && std::equal(b.dims, b.dims + 4, b.padded_dims);
  if (simd_ && b.ndims == 4 && b.padded_dims[1] == b.dims[1]) {
    const std::int64_t x = b.inner_blks[0];
    const bool o_block = b.inner_idxs[0] == 0 && x % 16 == 0;
    const bool f32_columns = f32 && nblks == 1 && o_block;
    const bool bf16_columns = !f32 && (one_by_one || hw <= 16) && nblks == 2 && o_block && b.inner_idxs[1] == 1 &&
                              b.inner_blks[1] == 2 && b.dims[1] % 2 == 0;
    if (f32_columns || bf16_columns) {
      kernel_ = Kernel::columns;
      const std::int64_t unit = f32 ? 1 : 2;  // elements per 32-bit unit
      hw_ = hw;
      row_stride_ = b.dims[1] * hw / unit;
      o_block_ = x;
      o_stride_ = b.strides[0] / unit;
      o_padded_ = b.padded_dims[0];
      column_dst_.resize(static_cast<std::size_t>(row_stride_));
      for (std::int64_t u = 0; u < row_stride_; ++u) {
        // f32: unit u is source column u of a row (I index u / HW, spatial u % HW). bf16: the
        // pair of I indices 2 * (u / HW) and the next one at spatial u % HW (I's outer index
        // is u / HW: I is blocked by its pairs).
        const std::int64_t i_outer = u / hw, h = u % hw / b.dims[3], w = u % b.dims[3];
        column_dst_[static_cast<std::size_t>(u)] = (i_outer * b.strides[1] + h * b.strides[2] + w * b.strides[3]) / unit;
      }
      return;
    }
  }
  const bool f32_i_rows = f32 && nblks == 2 && b.inner_idxs[0] == 0 && b.inner_blks[0] == 16 &&
                          b.inner_idxs[1] == 1 && b.inner_blks[1] == 16;
  const bool o_pairs = !f32 && nblks == 3 && b.inner_idxs[0] == 0 && b.inner_blks[0] == 8 &&
                       b.inner_idxs[1] == 1 && b.inner_blks[1] == 16 && b.inner_idxs[2] == 0 && b.inner_blks[2] == 2;
  if (simd_ && unpadded && hw >= 2 && hw <= 16 && (f32_i_rows || o_pairs)) {
    kernel_ = Kernel::i_rows;
    const std::int64_t unit = f32 ? 1 : 2;
    hw_ = hw;
    row_stride_ = b.dims[1] * hw;  // elements between O rows
    o_stride_ = b.strides[0];
    i_stride_ = b.strides[1];
    column_dst_.resize(static_cast<std::size_t>(hw));
    for (std::int64_t u = 0; u < hw; ++u) {
      column_dst_[static_cast<std::size_t>(u)] = (u / b.dims[3] * b.strides[2] + u % b.dims[3] * b.strides[3]) / unit;
    }
    return;
  }
  if (simd_ && o_pairs && one_by_one) {
    kernel_ = Kernel::row_pairs;
    row_stride_ = b.dims[1];
    return;
  }
  run_ = b.inner_blks[nblks - 1];
  bool runs = run_ >= 8;
  for (std::int64_t k = 0; runs && k < k_total; ++k) {
    runs = offset_[static_cast<std::size_t>(k)] == offset_[static_cast<std::size_t>(k - k % run_)] + k % run_;
  }
  if (runs) kernel_ = Kernel::runs;
}

template <class S, class D>
void PlainToBlocked::block(const S* src, std::int64_t src_off, D* dst, const std::int64_t* base, bool zero) const {
  const auto k_total = static_cast<std::int64_t>(offset_.size());
  if (zero) {
    std::fill(dst, dst + k_total, D{});
    return;
  }
  const std::size_t nd = dims_.size();
  bool whole = true;
  for (std::size_t d = 0; d < nd; ++d) whole = whole && base[d] + inner_span_[d] < dims_[d];
  if (whole && kernel_ == Kernel::runs) {
    for (std::int64_t k = 0; k < k_total; k += run_) {
      std::memcpy(dst + k, src + src_off + offset_[static_cast<std::size_t>(k)], static_cast<std::size_t>(run_) * sizeof(S));
    }
    return;
  }
  if constexpr (std::is_same_v<S, bf16_bits> && std::is_same_v<D, bf16_bits>) {
    if (whole && kernel_ == Kernel::row_pairs) {
      avx512::row_pairs_block(src + src_off, row_stride_, dst);
      return;
    }
  }
  if (whole) {
    // The 32-bit gather of a bf16 element reads the next element too: stay inside the source.
    if (simd_ && (sizeof(S) == 4 || src_off + max_offset_ + 1 < src_elements_)) {
      avx512::gather_block(src + src_off, offset_.data(), k_total, dst);
      return;
    }
    const S* s = src + src_off;
    for (std::int64_t k = 0; k < k_total; ++k) dst[k] = convert<S, D>(s[offset_[static_cast<std::size_t>(k)]]);
    return;
  }
  // A block on the edge of the padded area: each element on its own.
  for (std::int64_t k = 0; k < k_total; ++k) {
    const std::int64_t* index = &inner_index_[static_cast<std::size_t>(k) * nd];
    bool real = true;
    for (std::size_t d = 0; d < nd; ++d) real = real && base[d] + index[d] < dims_[d];
    dst[k] = real ? convert<S, D>(src[src_off + offset_[static_cast<std::size_t>(k)]]) : D{};
  }
}

template <class S, class D>
void PlainToBlocked::fill(std::size_t level, const S* src, std::int64_t src_off, D* dst, std::int64_t* base,
                          bool zero) const {
  const Level& l = levels_[level];
  const bool last = level + 1 == levels_.size();
  const std::int64_t start = base[l.dim];
  for (std::int64_t j = 0; j < l.extent; ++j) {
    base[l.dim] = start + j * l.step;
    const bool pad = zero || base[l.dim] >= dims_[static_cast<std::size_t>(l.dim)];
    const std::int64_t s = src_off + j * l.src_stride;
    if (last) {
      block(src, s, dst + j * l.dst_stride, base, pad);
    } else {
      fill(level + 1, src, s, dst + j * l.dst_stride, base, pad);
    }
  }
  base[l.dim] = start;
}

template <class S, class D>
void PlainToBlocked::run_typed(const S* src, D* dst) const {
  // The outermost level is split across the OpenMP team (each thread its own index state).
  const Level& top = levels_.front();
  std::int64_t total = static_cast<std::int64_t>(offset_.size());
  for (const Level& l : levels_) total *= l.extent;
  auto part = [&](std::int64_t j) {
    std::array<std::int64_t, kMaxDims> base{};
    base[static_cast<std::size_t>(top.dim)] = j * top.step;
    const bool pad = base[static_cast<std::size_t>(top.dim)] >= dims_[static_cast<std::size_t>(top.dim)];
    const std::int64_t s = j * top.src_stride;
    if (levels_.size() == 1) {
      block(src, s, dst + j * top.dst_stride, base.data(), pad);
    } else {
      fill(1, src, s, dst + j * top.dst_stride, base.data(), pad);
    }
  };
  if (total > kParallelMinElements && top.extent > 1) {
#pragma omp parallel for schedule(static)
    for (std::int64_t j = 0; j < top.extent; ++j) part(j);
  } else {
    for (std::int64_t j = 0; j < top.extent; ++j) part(j);
  }
}

void PlainToBlocked::run_columns(const void* src, void* dst) const {
  auto* d = static_cast<std::uint32_t*>(dst);
  const bool pairs = dst_type_ == dt::bf16 && hw_ > 1;  // bf16 I pairs HW elements apart
  const std::int64_t rows = dims_[0], tiles = o_padded_ / 16, per_block = o_block_ / 16;
  auto tile_row = [&](std::int64_t t) {  // source rows 16t..16t+15 (padding rows beyond O: zeros)
    const std::int64_t o0 = 16 * t, first = std::min(o0, rows - 1);
    std::uint32_t* out = d + (t / per_block) * o_stride_ + (t % per_block) * 16;
    const std::int64_t real = std::clamp<std::int64_t>(rows - o0, 0, 16);
    if (pairs) {  // one I pair (HW units) per tile
      const auto* s = static_cast<const std::uint16_t*>(src) + first * row_stride_ * 2;
      for (std::int64_t u0 = 0; u0 < row_stride_; u0 += hw_) {
        avx512::pair_tile(s + 2 * u0, row_stride_ * 2, hw_, real, hw_, column_dst_.data() + u0, out);
      }
      return;
    }
    const auto* s = static_cast<const std::uint32_t*>(src) + first * row_stride_;
    for (std::int64_t j0 = 0; j0 < row_stride_; j0 += 16) {
      avx512::column_tile(s, row_stride_, real, j0, std::min<std::int64_t>(16, row_stride_ - j0), column_dst_.data(), out);
    }
  };
  if (o_padded_ * row_stride_ > kParallelMinElements) {
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < tiles; ++t) tile_row(t);
  } else {
    for (std::int64_t t = 0; t < tiles; ++t) tile_row(t);
  }
}

void PlainToBlocked::run_i_rows(const void* src, void* dst) const {
  const bool f32 = dst_type_ == dt::f32;
  const std::int64_t o_blocks = dims_[0] / 16, i_blocks = dims_[1] / 16;
  auto o_block = [&](std::int64_t ob) {
    for (std::int64_t ib = 0; ib < i_blocks; ++ib) {
      const std::int64_t first = ob * 16 * row_stride_ + ib * 16 * hw_;  // source (ob * 16, ib * 16, 0, 0)
      if (f32) {
        // Per O row: the 16 I (rows, HW apart) by HW spatial (columns) tile, column hw being
        // the block row [o][16 I] at spatial hw.
        const auto* s = static_cast<const std::uint32_t*>(src) + first;
        auto* out = static_cast<std::uint32_t*>(dst) + ob * o_stride_ + ib * i_stride_;
        for (std::int64_t o = 0; o < 16; ++o) {
          avx512::column_tile(s + o * row_stride_, hw_, 16, 0, hw_, column_dst_.data(), out + o * 16);
        }
      } else {
        // Per pair of O rows: units (o, o + 1) of the 16 I by HW tile, column hw being the
        // block's [pair][16 I][2] at spatial hw.
        const auto* s = static_cast<const std::uint16_t*>(src) + first;
        auto* out = static_cast<std::uint32_t*>(dst) + (ob * o_stride_ + ib * i_stride_) / 2;
        for (std::int64_t p = 0; p < 8; ++p) {
          avx512::pair_tile(s + 2 * p * row_stride_, hw_, row_stride_, 16, hw_, column_dst_.data(), out + p * 16);
        }
      }
    }
  };
  if (dims_[0] * row_stride_ > kParallelMinElements) {
#pragma omp parallel for schedule(static)
    for (std::int64_t ob = 0; ob < o_blocks; ++ob) o_block(ob);
  } else {
    for (std::int64_t ob = 0; ob < o_blocks; ++ob) o_block(ob);
  }
}

void PlainToBlocked::run(const void* src, void* dst) const {
  if (kernel_ == Kernel::columns) {
    run_columns(src, dst);
    return;
  }
  if (kernel_ == Kernel::i_rows) {
    run_i_rows(src, dst);
    return;
  }
  const bool src_f32 = src_type_ == dt::f32, dst_f32 = dst_type_ == dt::f32;
  if (src_f32 && dst_f32) {
    run_typed(static_cast<const float*>(src), static_cast<float*>(dst));
  } else if (src_f32) {
    run_typed(static_cast<const float*>(src), static_cast<bf16_bits*>(dst));
  } else if (dst_f32) {
    run_typed(static_cast<const bf16_bits*>(src), static_cast<float*>(dst));
  } else {
    run_typed(static_cast<const bf16_bits*>(src), static_cast<bf16_bits*>(dst));
  }
}

}  // namespace kiln::cpu
