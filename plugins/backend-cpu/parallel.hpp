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

/// Runs body(i) for i in [0, n): one SIMD loop, split across the OpenMP team when n is large and
/// the team has more than one thread. `body` must be independent per index (element-wise ops only).
/// Small n never enters an OpenMP region at all: even `if (false)` costs a runtime call and
/// an outlined body the compiler will not vectorise as well.
///
/// Each loop calls its own copy of `body`, and callers capture by value ([=]): GCC 12 must assume
/// that a float stored through the loop's pointers may alias a float the closure holds by
/// reference (or one in a closure reached through a pointer), so it reloads and re-broadcasts
/// every captured constant per vector, and under `omp simd` through a reference it did not
/// vectorise a body with sqrt and division at all. Adam over the MLP's 101,770 parameters, Zen 2:
/// 57 us per call in the team at 1 thread and 310 us on the serial path, against 39-40 us for the
/// plain loop; with a local copy of a by-value closure 40 us at 1 thread and 32 at 2.
template <class Body>
inline void parallel_for(std::int64_t n, const Body& body) {
  if (n > kParallelMinElements && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      const Body local = body;
      const std::int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
      const std::int64_t begin = n * t / team, end = n * (t + 1) / team;
#pragma omp simd
      for (std::int64_t i = begin; i < end; ++i) local(i);
    }
  } else {
    const Body local = body;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) local(i);
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
