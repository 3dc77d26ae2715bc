// The AVX-512 kernels of PlainToBlocked (plain_to_blocked.hpp), internal to it: each fills one
// whole inner block or one 16-row tile of the blocked destination. They are compiled with their
// own target attribute in plain_to_blocked_avx512.cpp, so the plugin builds and runs on any
// x86-64 CPU; call them only where has_avx512() is true (PlainToBlocked decides once, in its
// constructor). What each kernel serves is described in plain_to_blocked.cpp, "Kernels".
#pragma once

#include <cstdint>

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace kiln::cpu::plain_to_blocked_avx512 {

/// Whether this CPU runs the kernels below (AVX-512 F, BW and VL).
bool has_avx512() noexcept;

/// gather: dst[k] = src[offset[k]] for k < k_total, converted from S to D (float, or bf16 as its
/// 16 bits: std::uint16_t), 16 elements per step. A bf16 source is gathered as 32-bit words, so
/// the caller keeps src + max(offset) + 1 inside the source.
template <class S, class D>
KILN_AVX512 void gather_block(const S* src, const std::int32_t* offset, std::int64_t k_total, D* dst);

/// row_pairs: one [8 pairs of O][16 I][2] bf16 block from 16 source rows of 16 contiguous I
/// (row o at src + o * row_stride): rows 2p and 2p + 1 interleaved element by element.
KILN_AVX512 void row_pairs_block(const std::uint16_t* src, std::int64_t row_stride, std::uint16_t* dst);

/// columns: 16 rows (`rows` of them real, the rest zeros) of `columns` 32-bit units starting at
/// column j0, transposed: column j goes to dst + column_dst[j] as 16 consecutive units.
KILN_AVX512 void column_tile(const std::uint32_t* src, std::int64_t row_stride, std::int64_t rows, std::int64_t j0,
                             std::int64_t columns, const std::int64_t* column_dst, std::uint32_t* dst);

/// As column_tile for bf16 pairs built on the fly: lane c of row k is the 32-bit unit
/// (lo[k * row_stride + c], lo[k * row_stride + partner + c]), c < columns (the pair partner of
/// an element is `partner` elements further on: the next I of a 3x3 kernel (+HW), or the next O
/// row). Column c goes to dst + column_dst[c] as 16 consecutive units.
KILN_AVX512 void pair_tile(const std::uint16_t* lo, std::int64_t row_stride, std::int64_t partner, std::int64_t rows,
                           std::int64_t columns, const std::int64_t* column_dst, std::uint32_t* dst);

}  // namespace kiln::cpu::plain_to_blocked_avx512
