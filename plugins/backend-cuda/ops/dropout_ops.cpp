// CudaBackend dropout forward/backward: validate (kernel_validate.hpp), then launch on the compute
// stream (kernels/dropout_kernels.hpp). The mask is the cpu backend's formula (kiln/rng.hpp via
// kernels/mask_rng.hpp), so a seed gives the same mask on either backend.
#include "cuda_backend.hpp"
#include "kernels/dropout_kernels.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p,
                                  std::uint64_t seed) {
  validate_dropout_forward(y, mask, x, p);
  kernels::dropout_forward(y.data(), mask.data_as<std::uint8_t>(), x.data(), x.numel(), x.dtype(),
                           p, seed, compute_stream());
}

void CudaBackend::dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p) {
  validate_dropout_backward(dx, dy, mask, p);
  kernels::dropout_backward(dx.data(), dy.data(), mask.data_as<std::uint8_t>(), dy.numel(),
                            dy.dtype(), p, compute_stream());
}

}  // namespace kiln::cuda
