// CudaBackend add, scale, lerp, cast and check_finite: validate (kernel_validate.hpp), then launch on
// the compute stream (kernels/elementwise_kernels.hpp). check_finite only ever sets the i32 flag
// to 1 on the device; the caller reads it after a synchronize (or a host copy), which is what
// lets one flag collect every gradient tensor of a step without a round trip per tensor.
#include "cuda_backend.hpp"
#include "kernels/elementwise_kernels.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::add(const Tensor& c, const Tensor& a, const Tensor& b) {
  validate_add(c, a, b);
  kernels::add(c.data(), a.data(), b.data(), c.numel(), c.dtype(), compute_stream());
}

void CudaBackend::scale(const Tensor& t, float factor) {
  validate_scale(t);
  kernels::scale(t.data(), factor, t.numel(), t.dtype(), compute_stream());
}

void CudaBackend::lerp(const Tensor& dst, const Tensor& src, float weight) {
  validate_lerp(dst, src, weight);
  kernels::lerp(dst.data_as<float>(), src.data_as<float>(), weight, dst.numel(), compute_stream());
}

void CudaBackend::cast(const Tensor& dst, const Tensor& src) {
  validate_cast(dst, src);
  kernels::cast(dst.data(), dst.dtype(), src.data(), src.dtype(), src.numel(), compute_stream());
}

void CudaBackend::check_finite(const Tensor& flag, const Tensor& t) {
  validate_check_finite(flag, t);
  kernels::check_finite(flag.data_as<std::int32_t>(), t.data(), t.numel(), t.dtype(),
                        compute_stream());
}

}  // namespace kiln::cuda
