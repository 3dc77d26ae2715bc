// normalize_image: dst (N, 3, H, W) f32/bf16/f16 = (src / 255 - mean[c]) / std[c] for u8 images
// src (N, H, W, 3) (the channels-last bytes image decoders produce). Computed as
// src * a[c] + b[c] with a = 1 / (255 std), b = -mean / std, which differs from the literal
// formula by at most a few f32 ulps. A std of 0 is refused rather than producing inf. A
// channels-last dst is the same walk as src (pixel by pixel), an NCHW one is written plane by plane.
#include "cpu_backend.hpp"
#include "ops/elem.hpp"
#include "parallel.hpp"
#include "validate.hpp"

namespace kiln::cpu {

void CpuBackend::normalize_image(const Tensor& dst, const Tensor& src, const ImageNormalize& norm) {
  sdk::check_normalize_image(OpCheck(Op::normalize_image), dst, src, norm);
  const std::int64_t n = src.dim(0), h = src.dim(1), w = src.dim(2);
  float a[3], b[3];
  for (int c = 0; c < 3; ++c) {
    a[c] = 1.0f / (255.0f * norm.std[c]);
    b[c] = -norm.mean[c] / norm.std[c];
  }
  const std::int64_t hw = h * w;
  const std::uint8_t* in = src.data_as<std::uint8_t>();
  use_our_threads();
  with_float_dtype(dst.dtype(), [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    T* out = static_cast<T*>(dst.data());
    const bool channels_last = dst.layout() == Layout::nhwc;
    const auto image = [&](std::int64_t i) {
      const std::uint8_t* pix = in + i * hw * 3;
      if (channels_last) {
        T* px = out + i * hw * 3;
        for (std::int64_t j = 0; j < hw; ++j) {
          for (int c = 0; c < 3; ++c) px[j * 3 + c] = E::store(static_cast<float>(pix[j * 3 + c]) * a[c] + b[c]);
        }
        return;
      }
      for (int c = 0; c < 3; ++c) {
        T* plane = out + (i * 3 + c) * hw;
        const float ac = a[c], bc = b[c];
#pragma omp simd
        for (std::int64_t j = 0; j < hw; ++j) plane[j] = E::store(static_cast<float>(pix[j * 3 + c]) * ac + bc);
      }
    };
    if (n > 1 && n * hw * 3 > kParallelMinElements) {
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) image(i);
    } else {
      for (std::int64_t i = 0; i < n; ++i) image(i);
    }
  });
}

}  // namespace kiln::cpu
