// The resampler built for AVX2 + FMA (compiled with -march=x86-64-v3 -ffp-contract=off; see
// resample_variants.hpp): every multiply-add is one FMA, by intrinsic, not by the compiler's
// choice. On other architectures this file builds a stub that is never called.
#include "resample_variants.hpp"

#if defined(__x86_64__) && !(defined(__AVX2__) && defined(__FMA__))
#error "resample_fused.cpp must be compiled with -march=x86-64-v3 (plugins/data-imagenet/CMakeLists.txt)"
#endif

#if defined(__x86_64__)
#include <immintrin.h>

#include "resample_kernels.hpp"

namespace kiln::imagenet {
namespace {

struct FusedArith {
  static v8f madd(v8f a, v8f b, v8f c) { return _mm256_fmadd_ps(a, b, c); }
  static float madd(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
};

}  // namespace

bool resample_fused_available() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void resample_fused(const unsigned char* rgb, int width, int height, const CropRect& rect, bool flip,
                    const TransformOptions& options, void* out) {
  resample_with<FusedArith>(rgb, width, height, rect, flip, options, out);
}

}  // namespace kiln::imagenet

#else

#include <cstdlib>

namespace kiln::imagenet {

bool resample_fused_available() { return false; }

void resample_fused(const unsigned char*, int, int, const CropRect&, bool, const TransformOptions&, void*) {
  std::abort();  // unreachable: resample() calls it only where resample_fused_available()
}

}  // namespace kiln::imagenet

#endif
