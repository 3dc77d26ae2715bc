// Kiln's max pooling on channels-last f32, bf16 and f16 tensors, forward and backward.
//
// oneDNN 2.6's AVX2 pooling on nhwc ran ResNet-50's stem max pool (3x3, stride 2, 112x112x64,
// batch 8) at 11% of the machine's copy bandwidth: 8.3 ms forward and 8.5 ms backward per step
// on the Zen 2 EPYC, for what is one read of x and one write of y (and the reverse). Here every
// output pixel takes its window's taps one after another as contiguous rows of C channels (loops
// the compiler vectorises across channels); the forward keeps, per output value, which tap of the
// window (row-major, 0..kernel_h*kernel_w-1) held the maximum, and the backward zeroes dx and adds
// each gradient at that tap.
//
// bf16 and f16 tensors (stored 16-bit) are pooled in f32, one image per thread: the image is
// widened into the thread's scratch, pooled there and the result narrowed (the bf16 plans used to
// widen into oneDNN's pooling, 5x the f32 loops' time on the Zen 3). The maximum is one of the
// inputs, so y is exact; dx's sums are rounded once, as the f32 path computes them.
//
// Semantics, the same as the reference the tests hold oneDNN's pooling to (tests/ops/test_pool.cpp)
// and PyTorch's max_pool2d: padding never wins (taps outside the image are skipped); the first
// maximum in window order wins a tie; a NaN wins over any number, and a later NaN over an earlier
// one. The backward routes gradients through the argmax of the last forward with the same plan.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/ops.hpp"

namespace kiln::cpu {

/// Whether these loops take a pooling: max, at most 255 taps per window (the argmax is a byte).
/// (The caller checks the dtype, f32, bf16 or f16, and channels-last tensors.)
bool maxpool_nhwc_fits(const Pool2dDesc& d);

/// y[n][p][q][c] = the maximum of x over the window of (p, q); argmax[n][p][q][c] = its tap.
/// Runs on the OpenMP team.
void maxpool_nhwc_forward(const Pool2dDesc& d, const float* x, float* y, std::uint8_t* argmax);

/// dx = 0, then dx at the argmax tap of each output += dy. Runs on the OpenMP team.
void maxpool_nhwc_backward(const Pool2dDesc& d, const float* dy, const std::uint8_t* argmax, float* dx);

/// Floats of scratch the 16-bit forms need for a team of `threads` (an input and an output image
/// each).
std::size_t maxpool_nhwc_16_scratch_floats(const Pool2dDesc& d, int threads);

/// The same on bf16 or f16 tensors (`dtype`), computed in f32 in `scratch`
/// (maxpool_nhwc_16_scratch_floats for the team that runs it). Run on the OpenMP team.
void maxpool_nhwc_forward_16(const Pool2dDesc& d, DType dtype, const std::uint16_t* x, std::uint16_t* y,
                             std::uint8_t* argmax, float* scratch);
void maxpool_nhwc_backward_16(const Pool2dDesc& d, DType dtype, const std::uint16_t* dy, const std::uint8_t* argmax,
                              std::uint16_t* dx, float* scratch);

}  // namespace kiln::cpu
