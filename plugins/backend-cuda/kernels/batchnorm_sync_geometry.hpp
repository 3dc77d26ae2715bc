// How the synchronised batch-norm kernels (batchnorm_sync_kernels.cu) walk an image and split
// each channel's reduction over blocks, as plain C++ so the choices are unit-tested without a GPU
// (tests/cuda-kernels/test_kernel_logic.cpp).
//
// Both layouts are (outer, C, inner) in memory order, as in the cpu backend's loops: NCHW is
// (N, C, H*W), nhwc is (N*H*W, C, 1); element (o, c, i) sits at (o*C + c)*inner + i.
//
// Per-channel sums are a two-pass grid reduction without atomics: pass one gives each of
// `chunks` blocks per channel (per tile of 32 channels in nhwc) a contiguous range of that
// channel's values and writes one f64 partial per (sum, channel, chunk) into a workspace; pass
// two adds a channel's partials in a fixed order (one warp per channel). The result is
// deterministic run to run and every block has enough values to hide memory latency. Chunks are
// chosen so the first pass launches about kTargetReduceBlocks blocks (one wave on an H200: 132
// SMs x 8 resident 256-thread blocks) but never fewer than kMinValuesPerThread values per thread.
// The index helpers at the end are __host__ __device__ (plain inline functions outside nvcc, as
// in mask_rng.hpp), so the CI test walks the kernels' exact index arithmetic on the host.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kiln/tensor.hpp"

#ifndef KILN_HOST_DEVICE
#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KILN_HOST_DEVICE inline
#endif
#endif

namespace kiln::cuda::kernels {

/// The (outer, C, inner) view of an (N, C, H, W) image in `layout` (row_major or nhwc).
struct ChannelWalk {
  std::int64_t outer = 0, c = 0, inner = 0;
  Layout layout = Layout::row_major;

  /// Values per channel (N*H*W in either layout).
  std::int64_t per_channel() const noexcept { return outer * inner; }
  std::int64_t total() const noexcept { return outer * c * inner; }
};

inline ChannelWalk channel_walk(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, Layout layout) {
  if (layout == Layout::nhwc) return {n * h * w, c, 1, layout};
  return {n, c, h * w, layout};
}

/// Threads per block of the first pass (NCHW: 256 x 1; nhwc: 32 channels x 8 rows).
inline constexpr unsigned kChannelReduceThreads = 256;
inline constexpr unsigned kNhwcChannelTile = 32;
inline constexpr unsigned kNhwcRowTile = kChannelReduceThreads / kNhwcChannelTile;
/// About one wave of first-pass blocks on an H200.
inline constexpr std::int64_t kTargetReduceBlocks = 1024;
/// A thread of the first pass reads at least this many values (unless the channel is smaller).
inline constexpr std::int64_t kMinValuesPerThread = 16;
/// Upper bound on chunks per channel (the second pass's warp reads them all; grid.y limit 65535).
inline constexpr std::int64_t kMaxChunks = 1024;

/// The first pass's grid: grid_x blocks across channels (NCHW: one per channel; nhwc: one per
/// tile of 32 channels), grid_y = chunks per channel, each chunk `per_chunk` consecutive values
/// of the channel (NCHW: flat (o, i) positions; nhwc: rows o). Every chunk is non-empty.
struct ChannelReduceGeometry {
  unsigned grid_x = 0, grid_y = 0;
  unsigned block_x = 0, block_y = 0;
  std::int64_t chunks = 0, per_chunk = 0;
};

inline ChannelReduceGeometry channel_reduce_geometry(const ChannelWalk& w) {
  const bool nhwc = w.layout == Layout::nhwc;
  // nhwc walks rows (one value of each of 32 channels per row); NCHW walks a channel's values.
  const std::int64_t items = w.per_channel();
  const std::int64_t threads_per_item = nhwc ? kNhwcRowTile : kChannelReduceThreads;
  const std::int64_t channel_blocks = nhwc ? (w.c + kNhwcChannelTile - 1) / kNhwcChannelTile : w.c;
  if (items <= 0 || channel_blocks <= 0) return {};
  const std::int64_t min_per_chunk = threads_per_item * kMinValuesPerThread;
  const std::int64_t by_work = (items + min_per_chunk - 1) / min_per_chunk;
  const std::int64_t by_occupancy = (kTargetReduceBlocks + channel_blocks - 1) / channel_blocks;
  const std::int64_t wanted = std::clamp<std::int64_t>(std::min(by_work, by_occupancy), 1, kMaxChunks);
  ChannelReduceGeometry g;
  g.per_chunk = (items + wanted - 1) / wanted;
  g.chunks = (items + g.per_chunk - 1) / g.per_chunk;  // no empty trailing chunk
  g.grid_x = static_cast<unsigned>(channel_blocks);
  g.grid_y = static_cast<unsigned>(g.chunks);
  g.block_x = nhwc ? kNhwcChannelTile : kChannelReduceThreads;
  g.block_y = nhwc ? kNhwcRowTile : 1;
  return g;
}

/// Device scratch (bytes) of each op: batchnorm_stats keeps one f64 partial per (channel, chunk)
/// and the f64 mean between its two passes; batchnorm_backward_reduce keeps two partials per
/// (channel, chunk); batchnorm_backward_elemt keeps three f32 per-channel coefficients.
inline std::size_t stats_workspace_bytes(const ChannelWalk& w) {
  const ChannelReduceGeometry g = channel_reduce_geometry(w);
  return static_cast<std::size_t>(w.c * g.chunks + w.c) * sizeof(double);
}
inline std::size_t backward_reduce_workspace_bytes(const ChannelWalk& w) {
  const ChannelReduceGeometry g = channel_reduce_geometry(w);
  return static_cast<std::size_t>(2 * w.c * g.chunks) * sizeof(double);
}
inline std::size_t backward_elemt_workspace_bytes(const ChannelWalk& w) {
  return static_cast<std::size_t>(3 * w.c) * sizeof(float);
}

/// Whether the element-wise pass may index with 32-bit unsigned arithmetic (cheaper division
/// for the channel of an element): every index it forms, up to total plus one grid stride
/// (at most 8192 x 256), stays below 2^32.
inline bool fits_32bit_index(std::int64_t total) noexcept { return total >= 0 && total < (std::int64_t{1} << 31); }

// ---- index arithmetic shared by the kernels and the CI test ------------------------------------

/// End of chunk `chunk` (values [chunk * per_chunk, end) of a channel of `items` values).
KILN_HOST_DEVICE std::int64_t chunk_end(std::int64_t chunk, std::int64_t per_chunk, std::int64_t items) {
  const std::int64_t end = (chunk + 1) * per_chunk;
  return end < items ? end : items;
}

/// A thread's position (o, i) = (j / inner, j % inner) in an NCHW channel while j advances by a
/// fixed step: one division at the start, then (step / inner, step % inner) with at most one
/// carry per step, so the first pass's loop has no division.
struct PlanarCursor {
  std::int64_t o = 0, i = 0;
};

KILN_HOST_DEVICE PlanarCursor planar_cursor(std::int64_t j, std::int64_t inner) { return {j / inner, j % inner}; }

KILN_HOST_DEVICE void planar_advance(PlanarCursor& p, std::int64_t step_o, std::int64_t step_i, std::int64_t inner) {
  p.o += step_o;
  p.i += step_i;
  if (p.i >= inner) {
    p.i -= inner;
    ++p.o;
  }
}

/// Memory offset of (o, c, i) in the (outer, C, inner) walk.
KILN_HOST_DEVICE std::int64_t walk_offset(std::int64_t o, std::int64_t c, std::int64_t i, std::int64_t channels,
                                          std::int64_t inner) {
  return (o * channels + c) * inner + i;
}

/// Slot of the first pass's partial for sum s (of the op's 1 or 2), channel c and chunk k in the
/// workspace: sums, then channels, then chunks, so a channel's partials are contiguous for the
/// second pass. batchnorm_stats keeps its f64 mean after the C x chunks partials.
KILN_HOST_DEVICE std::int64_t partial_slot(std::int64_t s, std::int64_t c, std::int64_t k, std::int64_t channels,
                                           std::int64_t chunks) {
  return (s * channels + c) * chunks + k;
}

/// Channel of the element at memory offset `at` (Index: std::uint32_t where fits_32bit_index, else
/// std::int64_t).
template <class Index>
KILN_HOST_DEVICE Index element_channel(Index at, Index channels, Index inner) {
  return (inner == 1 ? at : at / inner) % channels;
}

}  // namespace kiln::cuda::kernels
