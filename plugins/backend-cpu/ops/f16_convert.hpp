// Whole-buffer f16 <-> f32 conversion in vector registers, for the places that move whole
// activations between f16 storage and f32 compute (the f16 edges of conv/batch-norm/pooling,
// matmul's widening, cast). Results are bit-identical to the SDK's scalar conversion
// (kiln/sdk/half.hpp): round to nearest even, f16 subnormals exact, overflow to inf, NaN -> the
// scalar's quiet NaN (tests/ops/test_f16_convert.cpp checks every f16 value and every rounding
// boundary on each path this CPU can run).
//
// Why not oneDNN's reorders: on CPUs without AVX512-FP16, oneDNN 2.6 converts f16 with its
// reference reorder, one element at a time through a generic loop, which made an f16 ResNet step
// 40-70x slower than f32 (issue 13). Here the hardware converts 16 lanes per instruction (F16C
// vcvtph2ps/vcvtps2ph, as AVX-512 or AVX2 forms), chosen at run time from what the CPU reports,
// whatever -march the plugin was compiled with.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

/// Which loop the dispatching functions below use on this CPU: "avx512", "avx2+f16c" or "scalar".
const char* f16_convert_isa() noexcept;

/// out[i] = f32(in[i]), i < n. Single-threaded (callers split large buffers across threads).
void f16_to_f32_n(const std::uint16_t* in, float* out, std::size_t n) noexcept;
/// out[i] = f16(in[i]), round to nearest even.
void f32_to_f16_n(const float* in, std::uint16_t* out, std::size_t n) noexcept;

/// The same conversions across the OpenMP team for large n (chunks of whole vectors).
void f16_to_f32_parallel(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_parallel(const float* in, std::uint16_t* out, std::size_t n) noexcept;

/// Each path on its own, for the tests (callers must check the CPU supports it first).
namespace f16_paths {
bool has_avx512() noexcept;
bool has_avx2_f16c() noexcept;
void f16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void f16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void f16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept;
}  // namespace f16_paths

}  // namespace kiln::cpu
