// Plain-loop batch normalisation over NCHW data (batchnorm_loops.cpp) and over channels-last
// data (batchnorm_nhwc.cpp), and the synchronised batch-norm ops (batchnorm_sync_loops.cpp);
// each file says why it exists.
// Same arithmetic contract as the oneDNN path in batchnorm.cpp: the training forward produces the
// batch mean and the biased variance; the backward OVERWRITES dgamma/dbeta (the caller adds them
// into the parameter gradients). Arguments are validated by the caller.
#pragma once

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cpu {

void bn_loops_train_forward(const BatchNormDesc& d, const Tensor& y, float* mean, float* var,
                            const Tensor& x, const float* gamma, const float* beta);
void bn_loops_infer_forward(const BatchNormDesc& d, const Tensor& y, const Tensor& x,
                            const float* gamma, const float* beta, const float* running_mean,
                            const float* running_var);
void bn_loops_backward(const BatchNormDesc& d, const Tensor& dx, float* dgamma, float* dbeta,
                       const Tensor& dy, const Tensor& x, const float* gamma, const float* mean,
                       const float* invstd);

void bn_nhwc_train_forward(const BatchNormDesc& d, const Tensor& y, float* mean, float* var,
                           const Tensor& x, const float* gamma, const float* beta);
void bn_nhwc_infer_forward(const BatchNormDesc& d, const Tensor& y, const Tensor& x,
                           const float* gamma, const float* beta, const float* running_mean,
                           const float* running_var);
void bn_nhwc_backward(const BatchNormDesc& d, const Tensor& dx, float* dgamma, float* dbeta,
                      const Tensor& dy, const Tensor& x, const float* gamma, const float* mean,
                      const float* invstd);

/// The synchronised batch-norm ops (batchnorm_sync_loops.cpp), either layout, x's dtype.
void bn_sync_stats(const BatchNormDesc& d, float* mean, float* var, const Tensor& x);
void bn_sync_backward_reduce(const BatchNormDesc& d, float* sum_dy, float* sum_dy_xhat, const Tensor& dy,
                             const Tensor& x, const float* mean, const float* invstd);
void bn_sync_backward_elemt(const BatchNormDesc& d, const Tensor& dx, const Tensor& dy, const Tensor& x,
                            const float* gamma, const float* mean, const float* invstd, const float* sum_dy,
                            const float* sum_dy_xhat, std::int64_t count);

}  // namespace kiln::cpu
