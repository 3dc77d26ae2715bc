// The resampler for CPUs without AVX2 + FMA (see resample_variants.hpp): each multiply-add is a
// multiply and an add, each rounded, and -ffp-contract=off keeps the compiler from fusing them.
#include "resample_variants.hpp"

#include "resample_kernels.hpp"

namespace kiln::imagenet {
namespace {

struct SeparateArith {
  static v8f madd(v8f a, v8f b, v8f c) { return a * b + c; }
  static float madd(float a, float b, float c) { return a * b + c; }
};

}  // namespace

void resample_separate(const unsigned char* rgb, int width, int height, const CropRect& rect, bool flip,
                       const TransformOptions& options, void* out) {
  resample_with<SeparateArith>(rgb, width, height, rect, flip, options, out);
}

}  // namespace kiln::imagenet
