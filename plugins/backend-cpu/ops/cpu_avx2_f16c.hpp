// Whether this CPU runs the AVX2 + FMA + F16C code paths (the f16 conversions, the AVX2
// weight-gradient kernel). Header-only so that a test or bench that compiles one kernel source
// alone gets it too. F16C is read from CPUID: clang 14's __builtin_cpu_supports does not know
// "f16c"; __builtin_cpu_supports("avx2") also checks that the OS saves the YMM registers.
#pragma once

#include <cpuid.h>

namespace kiln::cpu {

inline bool cpu_has_avx2_fma_f16c() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

}  // namespace kiln::cpu
