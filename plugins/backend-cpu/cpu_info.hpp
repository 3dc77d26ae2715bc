// What the run banner says about the host CPU: model name, ISA, memory.
// Read once at backend construction from /proc/cpuinfo, sysconf and oneDNN.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/backend.hpp"

namespace kiln::cpu {

/// DeviceInfo for a CPU backend running `threads` OpenMP threads. name is the /proc/cpuinfo
/// "model name" plus "(avx512_bf16)" when the CPU has native bf16 dot products; detail names
/// the ISA oneDNN dispatches to and the oneDNN version.
DeviceInfo describe_host_cpu(int threads);

/// oneDNN's name for an ISA level ("avx2", "avx512_core_bf16", ...; "other" for the rest).
const char* isa_name(dnnl::cpu_isa isa);

/// Whether oneDNN can build bf16 primitives on this CPU at all (it needs AVX-512 core; with
/// avx512_bf16 they are native, without it oneDNN emulates the dot products). Probed by building
/// a tiny bf16 convolution descriptor, so it answers for the oneDNN actually loaded.
bool onednn_has_bf16(const dnnl::engine& engine);

/// Whether the oneDNN loaded has f32 Winograd convolutions on this CPU: 2.6 from AVX-512 up, 3.2
/// not even there (it refuses the algorithm on a Zen 4; other 3.x versions were not tried on
/// AVX-512). Probed the same way, with one of ResNet-50's stride-1 3x3 layers.
bool onednn_has_f32_winograd(const dnnl::engine& engine);

}  // namespace kiln::cpu
