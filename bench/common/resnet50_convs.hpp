// ResNet-50 v1.5's convolution shapes (torchvision's: stride on the 3x3s, 1x1 projections with
// the block's stride), with how many layers have each, for the layer benchmarks that time them
// through the cpu backend plugin (conv_census, conv_filter_avx2, conv_direct_avx2).
#pragma once

#include <cstdint>

#include "kiln/backend.hpp"

namespace kiln_bench {

/// Input channels, output channels, input side, kernel side, stride, and how many layers.
struct ConvShape {
  std::int64_t c, k, side, r, stride, count;

  bool stem() const { return c == 3; }
  /// Kiln's Winograd computes these by default on AVX2 (stride-1 3x3s above 7x7; the 7x7/512
  /// ones lost to direct: kiln_winograd_pays in the plugin's conv2d.cpp).
  bool winograd() const { return r == 3 && stride == 1 && side > 7; }
};

inline constexpr ConvShape kResNet50Convs[] = {
    {3, 64, 224, 7, 2, 1},                                                            // the stem
    {64, 64, 56, 1, 1, 1},    {256, 64, 56, 1, 1, 2},   {64, 64, 56, 3, 1, 3},    {64, 256, 56, 1, 1, 4},
    {256, 128, 56, 1, 1, 1},  {128, 128, 56, 3, 2, 1},  {128, 512, 28, 1, 1, 4},  {256, 512, 56, 1, 2, 1},
    {512, 128, 28, 1, 1, 3},  {128, 128, 28, 3, 1, 3},
    {512, 256, 28, 1, 1, 1},  {256, 256, 28, 3, 2, 1},  {256, 1024, 14, 1, 1, 6}, {512, 1024, 28, 1, 2, 1},
    {1024, 256, 14, 1, 1, 5}, {256, 256, 14, 3, 1, 5},
    {1024, 512, 14, 1, 1, 1}, {512, 512, 14, 3, 2, 1},  {512, 2048, 7, 1, 1, 3},  {1024, 2048, 14, 1, 2, 1},
    {2048, 512, 7, 1, 1, 2},  {512, 512, 7, 3, 1, 2},
};

/// The shape's f32 descriptor at batch n, with "same" padding (r / 2).
inline kiln::Conv2dDesc conv_desc(const ConvShape& l, std::int64_t n) {
  kiln::Conv2dDesc d;
  d.n = n, d.c = l.c, d.k = l.k, d.h = d.w = l.side, d.r = d.s = l.r;
  d.stride_h = d.stride_w = l.stride, d.pad_h = d.pad_w = l.r / 2, d.dtype = kiln::DType::f32;
  return d;
}

/// A channels-last f32 activation (n, c, side, side) on `backend`, as the ResNet model passes.
inline kiln::Tensor activation(kiln::Backend& backend, std::int64_t n, std::int64_t c, std::int64_t side) {
  return backend.allocate({n, c, side, side}, kiln::DType::f32, kiln::MemoryKind::host).with_layout(kiln::Layout::nhwc);
}

/// Weights (k, c, r, r) f32, plain OIHW.
inline kiln::Tensor weights(kiln::Backend& backend, const ConvShape& l) {
  return backend.allocate({l.k, l.c, l.r, l.r}, kiln::DType::f32, kiln::MemoryKind::host);
}

}  // namespace kiln_bench
