// f16 rows and blocks widened to f32 for the loops of the element-wise kernels. bf16 converts with a
// 16-bit shift, which GCC vectorises inside any loop; f16 needs F16C, which GCC 12 does not use
// for vectorised _Float16 conversions, and the SDK's integer conversion, vectorised, still costs
// about four times bf16's (an f16 ResNet-50 step spent 3x bf16's time in batch-norm and the
// activations). So a kernel widens each f16 row (or block of a flat loop) once with f16_convert's
// loops (F16C or AVX-512) into an f32 buffer, runs its f32 loop on that, and narrows the output
// back: the same values and the same f32 arithmetic as the per-element form, so the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/elem.hpp"
#include "ops/f16_convert.hpp"
#include "parallel.hpp"

namespace kiln::cpu {

/// Whether the row loops of storage type E work on rows widened to f32 (f16 only).
template <class E>
inline constexpr bool kWidensRows = std::is_same_v<E, Elem<DType::f16>>;

/// This thread's f32 row buffer `slot` (0-2: a loop may hold two input rows and an output row),
/// at least n floats; valid until the next call with the same slot on this thread.
inline float* f32_row_buffer(int slot, std::int64_t n) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[slot];
  if (b.size() < static_cast<std::size_t>(n)) b.resize(static_cast<std::size_t>(n));
  return b.data();
}

namespace f16_rows_detail {

inline constexpr std::int64_t kBlock = 1024;  // elements per block: 4 KB of f32 per operand, in L1

template <class F, std::size_t... I>
void map_block(F& f, float (&wide)[sizeof...(I)][kBlock], float* result, std::int64_t count,
               std::index_sequence<I...>) {
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) result[i] = f(wide[I][i]...);
}

}  // namespace f16_rows_detail

/// out[i] = f(in[i]...) for i < n, f taking and returning f32 values, over tensors stored as E
/// (an output may also be an input: each block is read before it is written). f32 and bf16
/// convert per element inside one SIMD loop (parallel_for); f16 runs in blocks widened to f32
/// and narrowed back (see above), split across the OpenMP team as parallel_for would.
template <class E, class F, class... In>
void map_elements(std::int64_t n, typename E::T* out, F f, const In*... in) {
  static_assert((std::is_same_v<In, typename E::T> && ...), "inputs are stored like the output");
  if constexpr (!kWidensRows<E>) {
    parallel_for(n, [=](std::int64_t i) { out[i] = E::store(f(E::load(in[i])...)); });
  } else {
    using f16_rows_detail::kBlock;
    const auto run_block = [&](std::int64_t b) {
      const std::int64_t begin = b * kBlock, count = std::min(kBlock, n - begin);
      float wide[sizeof...(In)][kBlock];
      float result[kBlock];
      std::size_t slot = 0;
      ((f16_to_f32_n(in + begin, wide[slot++], static_cast<std::size_t>(count))), ...);
      f16_rows_detail::map_block(f, wide, result, count, std::index_sequence_for<In...>{});
      f32_to_f16_n(result, out + begin, static_cast<std::size_t>(count));
    };
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    if (n > kParallelMinElements) {
#pragma omp parallel for schedule(static)
      for (std::int64_t b = 0; b < blocks; ++b) run_block(b);
    } else {
      for (std::int64_t b = 0; b < blocks; ++b) run_block(b);
    }
  }
}

}  // namespace kiln::cpu
