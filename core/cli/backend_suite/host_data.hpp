// Host-side numbers of the conformance suite: rounding to the 16-bit float types, random inputs,
// and the mapping between a tensor's logical (N, C, H, W) order and its bytes in a layout.
//
// Everything here is independent of any backend, so a reference never depends on the code it
// checks: bf16/f16 rounding is round-to-nearest-even done on the host (f16 through the
// compiler's _Float16), and inputs are rounded to the op's dtype before the reference sees them,
// so the reference computes on exactly the values the backend reads.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kiln/tensor.hpp"

namespace kiln::conformance {

/// `v` rounded to the nearest value of `dtype` (f32, bf16, f16; i32/u8 values pass unchanged).
double round_to(DType dtype, double v);
/// Every element of `v` rounded to `dtype`.
std::vector<double> rounded(DType dtype, std::vector<double> v);

/// The random source of one test case (fixed seed: failures reproduce).
using Rng = std::mt19937_64;
/// `n` uniform values in [lo, hi) rounded to `dtype`; never all zero.
std::vector<double> uniform(Rng& rng, std::size_t n, double lo, double hi, DType dtype);
/// `n` uniform integers in [0, bound).
std::vector<double> integers(Rng& rng, std::size_t n, std::int64_t bound);

/// Host tensor of `dtype` whose bytes hold `logical` (in logical C order) arranged as `layout`
/// would arrange them (nhwc only for rank-4 shapes). The tensor is tagged row_major: it is a
/// byte image for Backend::copy, not an operand.
Tensor encode(const std::vector<double>& logical, const Shape& shape, DType dtype, Layout layout);
/// The inverse of encode: the elements of host tensor `bytes` (arranged as `layout`) in logical
/// order as doubles.
std::vector<double> decode(const Tensor& bytes, const Shape& shape, Layout layout);
/// A host byte image of `shape` x `dtype` that reads as NaN (floats) or 0xA5 bytes (integers).
Tensor poison_image(const Shape& shape, DType dtype);

/// "f32", "bf16", "f16" / "nchw", "nhwc": the parts of a test case's name.
const char* layout_label(Layout layout);

}  // namespace kiln::conformance
