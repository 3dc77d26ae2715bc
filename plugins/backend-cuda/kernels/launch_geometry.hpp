// Launch geometry of Kiln's own kernels, as plain C++ so the choices are unit-tested without a GPU.
//
// Element-wise kernels are grid-stride loops: the grid covers the work once up to a cap (far more
// blocks than an H200 keeps resident, so the cap only bounds launch overhead on huge tensors) and
// each thread strides over the rest. Vectorised variants move 16 bytes per access (float4, 8
// halves) when every pointer of the call is 16-byte aligned; views into a flat arena may not be,
// and then the scalar variant runs. Row kernels (softmax) use one block per row sized to the row.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace kiln::cuda::kernels {

/// Threads per block of the element-wise kernels.
inline constexpr unsigned kElementwiseBlock = 256;
/// Upper bound on the grid of a grid-stride loop.
inline constexpr std::int64_t kMaxGridStrideBlocks = 8192;
/// Bytes one vectorised access moves.
inline constexpr std::size_t kVectorBytes = 16;

struct LaunchGeometry {
  unsigned grid = 0;   ///< blocks; 0 means there is nothing to launch
  unsigned block = 0;  ///< threads per block
};

/// Geometry of a grid-stride loop over `items` work items (elements, or vectors of elements).
inline LaunchGeometry grid_stride_geometry(std::int64_t items, unsigned block = kElementwiseBlock,
                                           std::int64_t max_grid = kMaxGridStrideBlocks) {
  if (items <= 0) return {0, block};
  const std::int64_t blocks = (items + block - 1) / block;
  return {static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, max_grid)), block};
}

/// Elements per vectorised access for elements of `element_bytes` bytes if every pointer is
/// aligned to kVectorBytes, else 1 (the scalar path). Null pointers (unused operands) are ignored.
inline int vector_width(std::size_t element_bytes, std::initializer_list<const void*> pointers) {
  if (element_bytes == 0 || element_bytes > kVectorBytes) return 1;
  for (const void* p : pointers) {
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % kVectorBytes != 0) return 1;
  }
  return static_cast<int>(kVectorBytes / element_bytes);
}

/// Most threads row_block_size() ever returns. Kernels launched with it declare
/// __launch_bounds__(kMaxRowBlock), so nvcc never gives them more registers per thread than a
/// 1024-thread block can have (64K registers / 1024 = 64); without it the launch of a large
/// block fails with "too many resources requested for launch" on a large class count.
inline constexpr unsigned kMaxRowBlock = 1024;

/// Threads per block for a kernel that reduces one row of `columns` values per block: about
/// eight values per thread, a power of two between one warp and kMaxRowBlock threads.
inline unsigned row_block_size(std::int64_t columns) {
  unsigned block = 32;
  while (block < kMaxRowBlock && static_cast<std::int64_t>(block) * 8 < columns) block *= 2;
  return block;
}

}  // namespace kiln::cuda::kernels
