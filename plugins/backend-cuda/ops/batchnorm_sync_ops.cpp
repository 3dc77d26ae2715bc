// CudaBackend's synchronised batch-norm ops ([model] sync_bn; backend.hpp): batchnorm_stats,
// batchnorm_backward_reduce and batchnorm_backward_elemt. cuDNN has no split batch-norm, so these
// are Kiln kernels (kernels/batchnorm_sync_kernels.hpp) with the cpu backend's semantics, on the
// plan plan_batchnorm made (its descriptor only; batchnorm_plan.hpp). Validate
// (kernel_validate.hpp), take the kernels' scratch from the caching allocator, enqueue on the
// compute stream. The scratch tensor may be dropped once the launches are enqueued: the
// allocator reuses a block only for later work on the same stream.
#include "cuda_backend.hpp"
#include "kernels/batchnorm_sync_kernels.hpp"
#include "ops/batchnorm_plan.hpp"
#include "ops/kernel_check.hpp"
#include "ops/kernel_validate.hpp"

namespace kiln::cuda {

void CudaBackend::batchnorm_stats(OpPlan& plan, const Tensor& mean, const Tensor& var, const Tensor& x) {
  const BatchNormDesc& d = batchnorm_plan_desc(KernelCheck(Op::batchnorm_stats), plan);
  const kernels::ChannelWalk w = validate_batchnorm_stats(d, mean, var, x);
  const Tensor scratch = workspace(kernels::stats_workspace_bytes(w));
  kernels::batchnorm_stats(mean.data_as<float>(), var.data_as<float>(), x.data(), w, d.dtype, scratch.data(),
                           compute_stream());
}

void CudaBackend::batchnorm_backward_reduce(OpPlan& plan, const Tensor& sum_dy, const Tensor& sum_dy_xhat,
                                            const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                                            const Tensor& save_invstd) {
  const BatchNormDesc& d = batchnorm_plan_desc(KernelCheck(Op::batchnorm_backward_reduce), plan);
  const kernels::ChannelWalk w = validate_batchnorm_backward_reduce(d, sum_dy, sum_dy_xhat, dy, x, save_mean, save_invstd);
  const Tensor scratch = workspace(kernels::backward_reduce_workspace_bytes(w));
  kernels::batchnorm_backward_reduce(sum_dy.data_as<float>(), sum_dy_xhat.data_as<float>(), dy.data(), x.data(),
                                     save_mean.data_as<float>(), save_invstd.data_as<float>(), w, d.dtype,
                                     scratch.data(), compute_stream());
}

void CudaBackend::batchnorm_backward_elemt(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& x,
                                           const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                                           const Tensor& sum_dy, const Tensor& sum_dy_xhat, std::int64_t count) {
  const BatchNormDesc& d = batchnorm_plan_desc(KernelCheck(Op::batchnorm_backward_elemt), plan);
  const kernels::ChannelWalk w = validate_batchnorm_backward_elemt(d, dx, dy, x, gamma, save_mean, save_invstd,
                                                                   sum_dy, sum_dy_xhat, count);
  const Tensor scratch = workspace(kernels::backward_elemt_workspace_bytes(w));
  kernels::batchnorm_backward_elemt(dx.data(), dy.data(), x.data(), gamma.data_as<float>(), save_mean.data_as<float>(),
                                    save_invstd.data_as<float>(), sum_dy.data_as<float>(),
                                    sum_dy_xhat.data_as<float>(), count, w, d.dtype, scratch.data(), compute_stream());
}

}  // namespace kiln::cuda
