// The library descriptor of libkiln-backend-cpu.so: one plugin, `cpu`, and its parameter schema.
// The core validates [backend] against kCpuParams before CpuBackend sees it.
#include <kiln/sdk/plugin.hpp>

#include <cstddef>
#include <cstdint>

#include "cpu_backend.hpp"

namespace {

constexpr kiln_param_spec_v1 kCpuParams[] = {
    {"threads", KILN_PARAM_INT, "0", nullptr,
     "OpenMP threads for every op; 0 = OMP_NUM_THREADS where set, else the CPUs this process may use divided "
     "by the number of local ranks."},
    {"bf16_compute", KILN_PARAM_STRING, "\"auto\"", "auto|f32",
     "auto: bf16 ops use oneDNN's bf16 kernels where the CPU has them (AVX-512), else bf16 is storage only and "
     "computed in f32; f32: always storage only, computed in f32."},
    {"conv_layout", KILN_PARAM_STRING, "\"auto\"", "auto|channels_last|blocked",
     "Activation layout inside the convolutions: channels_last (the tensors' own, no reorder), blocked (the one "
     "oneDNN picks, reordered at the edges), auto: blocked where oneDNN's ISA is below AVX-512 (AVX2), else "
     "channels_last."},
    {"conv1x1", KILN_PARAM_STRING, "\"auto\"", "auto|matmul|conv",
     "Pointwise convolutions (1x1, stride 1, no padding) on channels-last tensors: matmul (strided matmuls on the "
     "plain tensors, no weight reorders), conv (oneDNN's convolution), auto: with channels_last convolutions, "
     "matmul in f32 plans from AVX-512 up and for f32 plans' backward-data on AVX2, else conv. matmul and AVX2's "
     "auto also run strided 1x1s' f32 backward-data with at most 2048 output pixels as one dense matmul."},
    {"conv3x3", KILN_PARAM_STRING, "\"auto\"", "auto|winograd|kiln_winograd|direct",
     "3x3 convolutions of plans that compute in f32: winograd (Winograd F(4x4,3x3) where it was measured faster: "
     "oneDNN's kernels from AVX-512 up where the oneDNN loaded has them (2.6 does, 3.2 does not), else Kiln's own; stride 1, no dilation, one group; others run "
     "direct), kiln_winograd (Kiln's own on any CPU with AVX2, FMA and F16C), direct (oneDNN's direct convolution), "
     "auto: winograd where the CPU has AVX2, FMA and F16C, else direct."},
    {"conv_filter", KILN_PARAM_STRING, "\"auto\"", "auto|onednn|kiln_avx2",
     "Convolutions' backward-filter (weight gradients) in plans that compute in f32, where neither a 1x1 matmul nor "
     "Winograd computes it: onednn (its backward-weights primitive), kiln_avx2 (Kiln's AVX2 kernel on "
     "channels-last tensors where it fits and was measured faster: channels multiples of 16, one group, no "
     "dilation; any CPU with AVX2, FMA and F16C), auto: kiln_avx2 on AVX2 CPUs with channels_last convolutions, "
     "else onednn."},
    {"conv_direct", KILN_PARAM_STRING, "\"auto\"", "auto|onednn|kiln_avx2",
     "Forward and backward-data, in plans that compute in f32, of convolutions that neither a 1x1 matmul nor "
     "Winograd computes: onednn (its primitives), kiln_avx2 (Kiln's AVX2 direct convolution on channels-last "
     "tensors where it fits and was measured faster: kernels larger than 1x1, channels multiples of 16, one group, "
     "no dilation; any CPU with AVX2 and FMA), auto: kiln_avx2 on AVX2 CPUs with channels_last convolutions, else "
     "onednn."},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Backend, kiln::cpu::CpuBackend>(
    "cpu", "0.1.0", "CPU compute backend: oneDNN matmul/conv2d/batch-norm/pooling (f32, bf16), OpenMP/SIMD element-wise ops (f32, bf16, f16).",
    kCpuParams));

// Which path computed each convolution call on one cpu backend (ops/conv_paths.hpp), for the op
// tests and the layer benchmarks: calls `each` once per direction and path with its count, in a
// fixed order. Not part of the plugin contract: a caller finds it with dlsym on this library
// and passes a Backend this library made. Returns 0 (and calls nothing) for any other backend.
extern "C" __attribute__((visibility("default"))) int kiln_cpu_conv_paths(
    const kiln::Backend* backend, void (*each)(const char* direction, const char* path, std::uint64_t calls, void* context),
    void* context) {
  const auto* cpu = dynamic_cast<const kiln::cpu::CpuBackend*>(backend);
  if (cpu == nullptr || each == nullptr) return 0;
  using kiln::cpu::ConvDirection, kiln::cpu::ConvPath;
  for (std::size_t d = 0; d < kiln::cpu::kConvDirectionNames.size(); ++d) {
    for (std::size_t p = 0; p < kiln::cpu::kConvPathNames.size(); ++p) {
      each(kiln::cpu::kConvDirectionNames[d], kiln::cpu::kConvPathNames[p],
           cpu->conv_paths().calls(static_cast<ConvDirection>(d), static_cast<ConvPath>(p)), context);
    }
  }
  return 1;
}
