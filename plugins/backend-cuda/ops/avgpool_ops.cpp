// CudaBackend global average pooling forward/backward: validate (kernel_validate.hpp), then
// launch on the compute stream (kernels/avgpool_kernels.hpp). The image tensor's layout tag
// (row-major NCHW or nhwc) picks the kernel; the pooled (N, C) tensor is row-major.
#include "cuda_backend.hpp"
#include "kernels/avgpool_kernels.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::global_avgpool_forward(const Tensor& y, const Tensor& x) {
  const kernels::ImageGeometry g = validate_global_avgpool_forward(y, x);
  kernels::global_avgpool_forward(y.data(), x.data(), g, x.dtype(), compute_stream());
}

void CudaBackend::global_avgpool_backward(const Tensor& dx, const Tensor& dy) {
  const kernels::ImageGeometry g = validate_global_avgpool_backward(dx, dy);
  kernels::global_avgpool_backward(dx.data(), dy.data(), g, dy.dtype(), compute_stream());
}

}  // namespace kiln::cuda
