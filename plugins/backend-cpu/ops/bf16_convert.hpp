// Whole-buffer bf16 <-> f32 conversion in vector registers, for the bf16 edges of the oneDNN ops
// on CPUs where oneDNN 2.6 has no bf16 primitives (before AVX-512: compute_dtype in
// dnnl_edge.hpp): bf16 is then storage only, each operand is widened to f32, the primitive runs
// in f32 and outputs are narrowed back, as for f16 (f16_convert.hpp).
//
// Results are bit-identical to the SDK's scalar conversion (kiln/sdk/half.hpp): widening is the
// 16-bit shift; narrowing rounds to nearest even with integer arithmetic (so MXCSR's DAZ/FTZ do
// not touch subnormals), overflows to inf by that rounding, and turns a NaN into the scalar's
// quiet NaN (top 16 bits, quiet bit set). tests/ops/test_bf16_convert.cpp checks every bf16 value
// and every rounding boundary on each path this CPU can run. Paths are chosen at run time from
// cpuid (AVX-512BW/VL, AVX2, scalar), whatever -march the plugin was built with.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

/// Which loop the dispatching functions below use on this CPU: "avx512", "avx2" or "scalar".
const char* bf16_convert_isa() noexcept;

/// out[i] = f32(in[i]), i < n. Single-threaded.
void bf16_to_f32_n(const std::uint16_t* in, float* out, std::size_t n) noexcept;
/// out[i] = bf16(in[i]), round to nearest even.
void f32_to_bf16_n(const float* in, std::uint16_t* out, std::size_t n) noexcept;
/// out[i] = f32(bf16(in[i])): f32 values rounded to bf16 precision, kept in f32 (an f32 input
/// of a bf16 op computed in f32 must see what the bf16 primitive would read). in may equal out.
void f32_round_to_bf16_n(const float* in, float* out, std::size_t n) noexcept;

/// The same conversions across the OpenMP team for large n (chunks of whole vectors).
void bf16_to_f32_parallel(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_parallel(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void f32_round_to_bf16_parallel(const float* in, float* out, std::size_t n) noexcept;

/// Each path on its own, for the tests (callers must check the CPU supports it first).
namespace bf16_paths {
bool has_avx512() noexcept;
bool has_avx2() noexcept;
void bf16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void f32_round_to_bf16_avx512(const float* in, float* out, std::size_t n) noexcept;
void bf16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void f32_round_to_bf16_avx2(const float* in, float* out, std::size_t n) noexcept;
void bf16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void f32_round_to_bf16_scalar(const float* in, float* out, std::size_t n) noexcept;
}  // namespace bf16_paths

}  // namespace kiln::cpu
