// Kiln's max pooling on channels-last f32 tensors, forward and backward.
//
// oneDNN 2.6's AVX2 pooling on nhwc ran ResNet-50's stem max pool (3x3, stride 2, 112x112x64,
// batch 8) at 11% of the machine's copy bandwidth: 8.3 ms forward and 8.5 ms backward per step
// on the Zen 2 EPYC, for what is one read of x and one write of y (and the reverse). Here every
// output pixel takes its window's taps one after another as contiguous rows of C channels (loops
// the compiler vectorises across channels); the forward keeps, per output value, which tap of the
// window (row-major, 0..kernel_h*kernel_w-1) held the maximum, and the backward zeroes dx and adds
// each gradient at that tap.
//
// Semantics, the same as the reference the tests hold oneDNN's pooling to (tests/ops/test_pool.cpp)
// and PyTorch's max_pool2d: padding never wins (taps outside the image are skipped); the first
// maximum in window order wins a tie; a NaN wins over any number, and a later NaN over an earlier
// one. The backward routes gradients through the argmax of the last forward with the same plan.
#pragma once

#include <cstdint>

#include "kiln/ops.hpp"

namespace kiln::cpu {

/// Whether these loops take a pooling: max, at most 255 taps per window (the argmax is a byte).
/// (The caller checks dtype f32 and channels-last tensors.)
bool maxpool_nhwc_fits(const Pool2dDesc& d);

/// y[n][p][q][c] = the maximum of x over the window of (p, q); argmax[n][p][q][c] = its tap.
/// Runs on the OpenMP team.
void maxpool_nhwc_forward(const Pool2dDesc& d, const float* x, float* y, std::uint8_t* argmax);

/// dx = 0, then dx at the argmax tap of each output += dy. Runs on the OpenMP team.
void maxpool_nhwc_backward(const Pool2dDesc& d, const float* dy, const std::uint8_t* argmax, float* dx);

}  // namespace kiln::cpu
