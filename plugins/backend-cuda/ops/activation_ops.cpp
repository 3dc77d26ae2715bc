// CudaBackend activation ops (relu/tanh/sigmoid/gelu forward and backward, and the residual tail
// relu(x + residual)): validate (kernel_validate.hpp), then launch on the compute stream
// (kernels/activation_kernels.hpp). Layout-agnostic: element-wise over memory order, so NCHW and
// nhwc tensors work alike as long as the operands of one call share a layout.
#include "cuda_backend.hpp"
#include "kernels/activation_kernels.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::activation_forward(const Tensor& y, const Tensor& x, Activation act) {
  const std::int64_t n = validate_activation_forward(y, x, act);
  kernels::activation_forward(y.data(), x.data(), n, x.dtype(), act, compute_stream());
}

void CudaBackend::activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                      const Tensor& y, Activation act, Accumulate acc) {
  const Tensor& saved = validate_activation_backward(dx, dy, x, y, act);
  kernels::activation_backward(dx.data(), dy.data(), saved.data(), dy.numel(), dy.dtype(), act,
                               acc, compute_stream());
}

void CudaBackend::add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual) {
  validate_add_relu_forward(y, x, residual);
  kernels::add_relu_forward(y.data(), x.data(), residual.data(), y.numel(), y.dtype(),
                            compute_stream());
}

}  // namespace kiln::cuda
