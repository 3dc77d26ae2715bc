// Writes or adds an f32 tensor in one of oneDNN's blocked layouts into a plain (row-major) f32
// tensor of the same dims: the output edge of a convolution's weight gradient.
//
// Why not a oneDNN reorder: oneDNN 2.6's reorder from the backward-weights primitive's blocked
// diff_weights (ABcd16b16a, the 16x16 transposing one, with a sum post-op for Accumulate::yes)
// into OIHW runs at 1-2 GB/s on AMD EPYC (avx512_core_bf16): 6.2 ms for the 8 MB of a
// 2048x1024 1x1 layer where a memcpy takes 0.3 ms, 46 ms of CPU time per ResNet-50 step at
// batch 8, 15% of the backward-weights op (docs/benchmarks.md, "oneDNN 2.6 vs newer on AMD
// EPYC"). oneDNN 3.2 is no faster there. The loop here reads the blocked source through
// per-dimension offset tables (any blocking that oneDNN's memory descriptor can describe,
// padding included), one block-sized tile of output rows at a time so that the tile's source
// stays in L1, and writes the plain destination in order.
#pragma once

#include <cstdint>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::cpu {

class BlockedToPlain {
 public:
  /// Whether `blocked` -> `plain` is a case this class handles: both f32 with the same 4-D
  /// (OIHW) or 5-D (GOIHW) dims, `blocked` in a blocked format with at least one inner block,
  /// `plain` dense row-major.
  static bool handles(const dnnl::memory::desc& blocked, const dnnl::memory::desc& plain);

  /// `blocked` must satisfy handles() with some plain descriptor of its dims.
  explicit BlockedToPlain(const dnnl::memory::desc& blocked);

  /// dst = src (accumulate false) or dst += src (accumulate true), dst row-major. Uses the
  /// calling thread's OpenMP team for large tensors.
  void run(const float* src, float* dst, bool accumulate) const;

 private:
  std::vector<std::int64_t> dims_;                  // as given: [G,] O, I, H, W
  std::vector<std::vector<std::int64_t>> offset_;  // per dim: element offset of each index in src
  std::int64_t tile_o_ = 1, tile_i_ = 1;            // O and I block sizes: one L1-sized tile
};

}  // namespace kiln::cpu
