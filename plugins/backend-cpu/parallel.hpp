// When an element-wise loop is worth an OpenMP team.
// Forking a team costs a few microseconds; below ~16k f32 elements (64 KiB, L1/L2-resident) a
// single thread finishes sooner, which matters for the small MLP layers the benchmark runs.
#pragma once

#include <omp.h>

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

/// Bulk memory ops (copy, fill) of at least this many bytes split across the OpenMP team: one
/// core does not saturate the memory bus (the Zen 4 EPYC: a 64 MiB copy ran at ~20 GB/s on one
/// core, while SGD's loop over two reached 42).
inline constexpr std::int64_t kParallelMinBytes = 1 << 20;

/// Runs body(begin, end) once per OpenMP thread over contiguous slices of [0, n) when
/// `parallel`, else once over all of it: for loops that are library calls (memcpy, std::fill)
/// rather than per-element bodies.
template <class Body>
inline void parallel_slices(std::int64_t n, bool parallel, Body&& body) {
  if (!parallel) {
    body(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const std::int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const std::int64_t begin = n * t / team, end = n * (t + 1) / team;
    if (begin < end) body(begin, end);
  }
}

}  // namespace kiln::cpu
