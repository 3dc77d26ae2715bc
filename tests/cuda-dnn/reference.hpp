// Float64 reference implementations for test_cuda_dnn_gpu: naive loops over logical NCHW / OIHW
// values, written from the definitions in interfaces/kiln/ops.hpp and backend.hpp.
#pragma once

#include "gpu_fixture.hpp"
#include "kiln/ops.hpp"

namespace kiln::cuda_test {

Values ref_conv_forward(const Conv2dDesc& d, const Values& x, const Values& w);
Values ref_conv_backward_data(const Conv2dDesc& d, const Values& dy, const Values& w);
Values ref_conv_backward_filter(const Conv2dDesc& d, const Values& dy, const Values& x);

struct BnForward {
  Values y, mean, invstd, running_mean, running_var;
};
BnForward ref_bn_train(const BatchNormDesc& d, const Values& x, const Values& gamma,
                       const Values& beta, const Values& running_mean, const Values& running_var);
Values ref_bn_infer(const BatchNormDesc& d, const Values& x, const Values& gamma,
                    const Values& beta, const Values& running_mean, const Values& running_var);
struct BnBackward {
  Values dx, dgamma, dbeta;  // parameter gradients without the accumulation
};
BnBackward ref_bn_backward(const BatchNormDesc& d, const Values& dy, const Values& x,
                           const Values& gamma, const Values& mean, const Values& invstd);

Values ref_pool_forward(const Pool2dDesc& d, const Values& x);
Values ref_pool_backward(const Pool2dDesc& d, const Values& dy, const Values& x);

/// alpha * op(a) op(b) + beta * c0 + bias (bias may be empty); a, b, c row-major.
Values ref_matmul(std::int64_t m, std::int64_t n, std::int64_t k, const Values& a, Transpose ta,
                  const Values& b, Transpose tb, double alpha, double beta, const Values& c0,
                  const Values& bias);

}  // namespace kiln::cuda_test
