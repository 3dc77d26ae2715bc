// The checks every backend makes on the descriptors and shapes of its planned ops and of matmul,
// shared like OpCheck (op_check.hpp) so a wrong geometry is refused with the same words whatever
// the backend: "cpu backend, conv2d_forward: conv2d f32 x(1, 3, 8, 8) k=4 3x3 ... gives an empty
// output (0 x 0); the input is smaller than the dilated filter; fix the arguments ...".
#pragma once

#include <cstdint>
#include <string>

#include "kiln/ops.hpp"
#include "kiln/sdk/op_check.hpp"
#include "kiln/tensor.hpp"

namespace kiln::sdk {

/// "conv2d f32 x(8, 64, 56, 56) k=64 3x3 stride 1x1 pad 1x1 dilation 1x1 groups 1".
std::string describe(const Conv2dDesc& d);
/// "max pool f32 (8, 64, 112, 112) kernel 3x3 stride 2x2 pad 1x1".
std::string describe(const Pool2dDesc& d);
/// "batchnorm f32 (8, 64, 56, 56) eps 1e-05 momentum 0.1".
std::string describe(const BatchNormDesc& d);

/// Positive sizes, strides, dilation and groups; channels divisible by groups; a non-empty output.
void check_conv2d_desc(const OpCheck& check, const Conv2dDesc& d);
/// Positive sizes, kernel and stride; padding at most half the kernel (PyTorch); non-empty output.
void check_pool2d_desc(const OpCheck& check, const Pool2dDesc& d);
/// Positive sizes, eps > 0, momentum in [0, 1].
void check_batchnorm_desc(const OpCheck& check, const BatchNormDesc& d);

/// Whether a backend lets the image operands of one batch-norm call differ in layout (it
/// converts per operand) or needs them in one layout, as the contract guarantees (backend.hpp).
enum class MixedLayouts : std::uint8_t { refused, accepted };

/// batchnorm_train_forward's operands: y and x in the plan's dtype and (N, C, H, W) (row-major or
/// nhwc), the statistics and gamma/beta f32 (C), and at least 2 values per channel (as PyTorch).
void check_batchnorm_train(const OpCheck& check, const BatchNormDesc& d, MixedLayouts mixed,
                           const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                           const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& running_mean, const Tensor& running_var);
/// batchnorm_infer_forward's operands, with the same rules.
void check_batchnorm_infer(const OpCheck& check, const BatchNormDesc& d, MixedLayouts mixed,
                           const Tensor& y, const Tensor& x, const Tensor& gamma,
                           const Tensor& beta, const Tensor& running_mean,
                           const Tensor& running_var);
/// batchnorm_backward's operands, with the same rules (dgamma/dbeta f32 (C)).
void check_batchnorm_backward(const OpCheck& check, const BatchNormDesc& d, MixedLayouts mixed,
                              const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                              const Tensor& dy, const Tensor& x, const Tensor& gamma,
                              const Tensor& save_mean, const Tensor& save_invstd);
/// batchnorm_stats' operands: x as above, mean/var f32 (C); one value per channel is enough
/// (the 2-value minimum of training applies to the global batch, summed over ranks).
void check_batchnorm_stats(const OpCheck& check, const BatchNormDesc& d, const Tensor& mean,
                           const Tensor& var, const Tensor& x);
/// batchnorm_backward_reduce's operands: dy in x's layout, the sums and statistics f32 (C).
void check_batchnorm_backward_reduce(const OpCheck& check, const BatchNormDesc& d, const Tensor& sum_dy,
                                     const Tensor& sum_dy_xhat, const Tensor& dy, const Tensor& x,
                                     const Tensor& save_mean, const Tensor& save_invstd);
/// batchnorm_backward_elemt's operands: dx and dy in x's layout, the rest f32 (C), and a global
/// count at least this batch's N*H*W.
void check_batchnorm_backward_elemt(const OpCheck& check, const BatchNormDesc& d, const Tensor& dx,
                                    const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                    const Tensor& save_mean, const Tensor& save_invstd, const Tensor& sum_dy,
                                    const Tensor& sum_dy_xhat, std::int64_t count);

/// The (M, N, K) of a matmul whose arguments check_matmul accepted.
struct MatmulDims {
  std::int64_t m = 0, n = 0, k = 0;
};
/// matmul's argument rules (backend.hpp, ops.hpp): 2-D row-major operands, a in f32/bf16/f16 and
/// b in a's dtype, c in f32 or a's dtype with shape (M, N), inner dimensions equal, bias (if
/// defined) of shape (N) in f32 or c's dtype. Returns the dimensions.
MatmulDims check_matmul(const OpCheck& check, const Tensor& c, const Tensor& a, Transpose ta,
                        const Tensor& b, Transpose tb, const Tensor& bias);

}  // namespace kiln::sdk
