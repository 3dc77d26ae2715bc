// What the run banner says about the host CPU: model name, ISA, memory.
// Read once at backend construction from /proc/cpuinfo, sysconf and oneDNN.
#pragma once

#include "kiln/backend.hpp"

namespace kiln::cpu {

/// DeviceInfo for a CPU backend running `threads` OpenMP threads. name is the /proc/cpuinfo
/// "model name" plus "(avx512_bf16)" when the CPU has native bf16 dot products; detail names
/// the ISA oneDNN dispatches to and the oneDNN version.
DeviceInfo describe_host_cpu(int threads);

}  // namespace kiln::cpu
