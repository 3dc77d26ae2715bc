// The resampler's two builds. One source (resample_kernels.hpp) is compiled twice because the
// output bits depend on where products and sums are rounded: the fused build rounds each
// multiply-add once (FMA), as the pinned hashes were recorded, and needs AVX2 + FMA; the separate
// build rounds the product and the sum apart (the same values to within a rounding, not the same
// bits) and runs on any x86-64 or other CPU. Both are plain functions rather than
// target_clones: a clone's body is one source for every target, so it cannot call the FMA
// intrinsics, and without them which products get fused is the compiler's choice.
#pragma once

#include "transform.hpp"

namespace kiln::imagenet {

/// True when this CPU runs the fused build (x86-64 with AVX2 and FMA).
bool resample_fused_available();

/// resample() with one rounding per multiply-add; only where resample_fused_available().
void resample_fused(const unsigned char* rgb, int width, int height, const CropRect& rect, bool flip,
                    const TransformOptions& options, void* out);

/// resample() with the product and the sum rounded apart; any CPU.
void resample_separate(const unsigned char* rgb, int width, int height, const CropRect& rect, bool flip,
                       const TransformOptions& options, void* out);

}  // namespace kiln::imagenet
