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
