// The clock the standalone oneDNN benchmarks (bench/onednn_versions, bench/conv1x1_matmul) time
// with: wall time, or the CPU time of all the process's threads. On a machine shared with other
// work, a run at OMP_NUM_THREADS=1 (or with OMP_WAIT_POLICY=passive, so that waiting threads
// sleep instead of spinning) on the CPU clock measures the work itself, not the waits for a core.
#pragma once

#include <chrono>
#include <ctime>

namespace kiln_bench {

inline double now_ms(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

}  // namespace kiln_bench
