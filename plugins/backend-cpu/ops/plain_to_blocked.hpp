// Copies a plain (row-major) OIHW / GOIHW tensor into one of oneDNN's blocked weight layouts,
// converting f32 <-> bf16 on the way where the dtypes differ: the weight input edge of every
// convolution step (forward and backward-data).
//
// Why not a oneDNN reorder: oneDNN 2.6's transposing reorders into the blocked weight layouts
// (Acdb64a, BAcd16a16b, AcdB64a2b, BAcd8a16b2a, ...) ran at ~1-1.3 ms per 2M elements on one
// thread of this AMD EPYC (2.3 ms for the 2048x1024 bf16 weights inside a training step, where a
// plain f32 -> bf16 conversion of the same tensor takes 0.14 ms), ~20 ms of CPU per bf16
// ResNet-50 step. The loop here walks the outer dims of the blocked layout (from its memory
// descriptor) in the plain source's order and fills one whole inner block at a time (the
// product of the inner blocks: 64 to 256 elements, contiguous in the destination): with a
// vector kernel for the common layouts (16x16 transposes, row-pair interleaves, contiguous runs:
// plain_to_blocked.cpp, "Kernels"), else by gathering through a table of source offsets computed
// once. Padded positions (dims not multiples of their blocks) are written as zeros: the
// destination is a scratch buffer shared by every layer, so it may hold another layer's weights
// there.
//
// bf16 results are rounded as oneDNN rounds them (its bfloat16_t and the avx512_bf16
// vcvtneps2bf16 instruction agree): round to nearest even, denormals to a signed zero, NaNs kept
// quiet.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::cpu {

class PlainToBlocked {
 public:
  /// Whether `plain` -> `blocked` is a case this class handles: both 4-D (OIHW) or 5-D (GOIHW)
  /// of the same dims, f32 or bf16 each, `plain` dense row-major, `blocked` a blocked format
  /// with at least one inner block, no offset and no extra (compensation) data.
  static bool handles(const dnnl::memory::desc& plain, const dnnl::memory::desc& blocked);

  /// The pair must satisfy handles(); throws std::invalid_argument otherwise. `simd` false
  /// keeps to the scalar gather even on AVX-512 CPUs (the tests compare both paths).
  PlainToBlocked(const dnnl::memory::desc& plain, const dnnl::memory::desc& blocked, bool simd = true);

  /// Whether a vector kernel covers this layout (see plain_to_blocked.cpp, "Kernels"): the
  /// layouts where this loop was measured faster than oneDNN 2.6's reorder (or at par). The
  /// others go through a per-element gather, correct but slower than oneDNN's JIT reorder, so
  /// the weight edges keep oneDNN for them.
  bool vectorised() const { return kernel_ != Kernel::gather; }

  /// dst (blocked, padding included) = src (plain). Uses the calling thread's OpenMP team for
  /// large tensors.
  void run(const void* src, void* dst) const;

  /// One outer loop level: one dim's index divided by its block, in destination memory order.
  struct Level {
    std::int64_t extent;      // padded_dims[dim] / block
    std::int64_t dst_stride;  // elements between consecutive values in the destination
    std::int64_t src_stride;  // elements between consecutive values in the plain source
    std::int64_t step;        // the dim's block: how much one value adds to the dim's index
    int dim;
  };

 private:
  template <class S, class D>
  void run_typed(const S* src, D* dst) const;
  template <class S, class D>
  void fill(std::size_t level, const S* src, std::int64_t src_off, D* dst, std::int64_t* base, bool zero) const;
  template <class S, class D>
  void block(const S* src, std::int64_t src_off, D* dst, const std::int64_t* base, bool zero) const;

  void choose_kernel(const dnnl::memory::desc& blocked);
  void run_columns(const void* src, void* dst) const;
  void run_i_rows(const void* src, void* dst) const;

  /// Which loop fills a whole block (see plain_to_blocked.cpp, "Kernels").
  enum class Kernel : std::uint8_t { gather, runs, row_pairs, columns, i_rows };

  dnnl::memory::data_type src_type_, dst_type_;
  bool simd_ = false;
  Kernel kernel_ = Kernel::gather;
  std::int64_t run_ = 1;          // runs: contiguous source elements per run (the innermost block)
  std::int64_t row_stride_ = 0;   // row_pairs, i_rows: source elements between O rows; columns: units
  std::int64_t hw_ = 1;           // columns, i_rows: kernel height * width
  std::int64_t i_stride_ = 0;     // i_rows: destination stride of an I block
  std::int64_t o_block_ = 0;      // columns: the O block, O stride and padded O
  std::int64_t o_stride_ = 0, o_padded_ = 0;
  std::vector<std::int64_t> column_dst_;  // columns, i_rows: per tile column, its destination offset (units)
  std::int64_t src_elements_ = 0;
  std::vector<std::int64_t> dims_;
  std::vector<Level> levels_;              // outer levels, outermost first (at least one)
  std::vector<std::int32_t> offset_;       // per element of an inner block: its source offset
  std::int64_t max_offset_ = 0;            // the largest of them
  std::vector<std::int64_t> inner_index_;  // per element and dim: what the block adds to the index
  std::vector<std::int64_t> inner_span_;   // per dim: the largest of those
};

/// How many weight input edges ran through Kiln's loop and how many through a oneDNN reorder
/// (layouts or dtypes PlainToBlocked does not handle), since the process started: the cpu
/// backend's README explains how to read them; the tests check which path ran.
struct WeightReorderCounts {
  std::atomic<std::uint64_t> kiln_loop{0};
  std::atomic<std::uint64_t> onednn_reorder{0};
};
WeightReorderCounts& weight_reorder_counts();

}  // namespace kiln::cpu
