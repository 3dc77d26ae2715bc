// When an element-wise loop is worth an OpenMP team.
// Forking a team costs a few microseconds; below ~16k f32 elements (64 KiB, L1/L2-resident) a
// single thread finishes sooner, which matters for the small MLP layers the benchmark runs.
#pragma once

#include <cstdint>

namespace kiln::cpu {

inline constexpr std::int64_t kParallelMinElements = 16384;

}  // namespace kiln::cpu

namespace kiln::cpu {

/// Runs body(i) for i in [0, n): one SIMD loop, split across the OpenMP team when n is large.
/// `body` must be independent per index (element-wise ops only).
/// Small n never enters an OpenMP region at all: even `if (false)` costs a runtime call and
/// an outlined body the compiler will not vectorise as well.
template <class Body>
inline void parallel_for(std::int64_t n, Body&& body) {
  if (n > kParallelMinElements) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) body(i);
  } else {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) body(i);
  }
}

}  // namespace kiln::cpu
