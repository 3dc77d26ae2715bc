// Argument validation of every kernel-group op of the cuda backend, separated from the launches
// so it is plain C++ and unit-tested without a GPU (tests/cuda-kernels). Each function runs the
// SDK's shared check of its op (kiln/sdk/op_args.hpp: the cpu backend's rules and messages) for
// device memory, adds the kernels' own limits, and returns what the launcher needs. What the
// backend supports is op_table.hpp.
//
// What the host cannot check without a synchronize: label values (they live on the device);
// softmax_xent turns a label outside [0, K) into a NaN loss instead (softmax_xent_kernels.hpp).
#pragma once

#include <cstdint>

#include "kernels/batchnorm_sync_geometry.hpp"
#include "kernels/kernel_args.hpp"
#include "kernels/optimizer_math.hpp"
#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {

/// Element count.
std::int64_t validate_activation_forward(const Tensor& y, const Tensor& x, Activation act);
/// The tensor the derivative is computed from: y for relu/tanh/sigmoid, x for gelu.
const Tensor& validate_activation_backward(const Tensor& dx, const Tensor& dy, const Tensor& x,
                                           const Tensor& y, Activation act);
void validate_add_relu_forward(const Tensor& y, const Tensor& x, const Tensor& residual);
void validate_dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, float p);
void validate_dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, float p);
void validate_add(const Tensor& c, const Tensor& a, const Tensor& b);
void validate_cast(const Tensor& dst, const Tensor& src);
void validate_scale(const Tensor& t);
void validate_lerp(const Tensor& dst, const Tensor& src, float weight);
void validate_check_finite(const Tensor& flag, const Tensor& t);
kernels::RowsClasses validate_softmax_xent_forward(const Tensor& probs, const Tensor& stats,
                                                   const Tensor& logits, const Tensor& labels,
                                                   float label_smoothing);
kernels::RowsClasses validate_softmax_xent_backward(const Tensor& dlogits, const Tensor& probs,
                                                    const Tensor& labels, float label_smoothing);
/// logits (rows, classes) of top_k_hits, within the kernel's 32-bit indexing.
kernels::RowsClasses validate_top_k_hits(const Tensor& count, const Tensor& logits, const Tensor& labels,
                                         std::int64_t k);
void validate_sgd_update(const Tensor& param, const Tensor& momentum, const Tensor& grad,
                         const SgdStep& step);
void validate_adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                          const Tensor& grad, const AdamStep& step);
kernels::ImageGeometry validate_global_avgpool_forward(const Tensor& y, const Tensor& x);
kernels::ImageGeometry validate_global_avgpool_backward(const Tensor& dx, const Tensor& dy);
kernels::ChannelAffine validate_normalize_image(const Tensor& dst, const Tensor& src,
                                                const ImageNormalize& norm);
/// The synchronised batch-norm ops, for the plan's descriptor `d`: how the kernels walk x.
kernels::ChannelWalk validate_batchnorm_stats(const BatchNormDesc& d, const Tensor& mean, const Tensor& var,
                                              const Tensor& x);
kernels::ChannelWalk validate_batchnorm_backward_reduce(const BatchNormDesc& d, const Tensor& sum_dy,
                                                        const Tensor& sum_dy_xhat, const Tensor& dy, const Tensor& x,
                                                        const Tensor& save_mean, const Tensor& save_invstd);
kernels::ChannelWalk validate_batchnorm_backward_elemt(const BatchNormDesc& d, const Tensor& dx, const Tensor& dy,
                                                       const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                                       const Tensor& save_invstd, const Tensor& sum_dy,
                                                       const Tensor& sum_dy_xhat, std::int64_t count);

}  // namespace kiln::cuda
