// CudaBackend fused optimizer updates (SGD with momentum/Nesterov, Adam/AdamW) over flat f32
// buffers: validate (kernel_validate.hpp), compute the per-call constants on the host
// (kernels/optimizer_math.hpp, as the cpu backend does), then one kernel over the whole arena
// (kernels/optimizer_kernels.hpp).
#include "cuda_backend.hpp"
#include "kernels/optimizer_kernels.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                             const SgdStep& step) {
  validate_sgd_update(param, momentum, grad, step);
  float* buf = step.momentum == 0.0f ? nullptr : momentum.data_as<float>();
  kernels::sgd_update(param.data_as<float>(), buf, grad.data_as<float>(), param.numel(), step,
                      compute_stream());
}

void CudaBackend::adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                              const Tensor& grad, const AdamStep& step) {
  validate_adam_update(param, m, v, grad, step);
  kernels::adam_update(param.data_as<float>(), m.data_as<float>(), v.data_as<float>(),
                       grad.data_as<float>(), param.numel(), kernels::adam_coefficients(step),
                       compute_stream());
}

}  // namespace kiln::cuda
