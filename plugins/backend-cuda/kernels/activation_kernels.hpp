// Launchers of the activation kernels (activation_kernels.cu): plain C++ signatures over raw
// device pointers, so ops/*.cpp never include device code. Outputs first, then inputs, then sizes
// (llm.c's order); every launcher enqueues on `stream`, returns before the work is done and
// throws BackendError naming the op if the launch fails. n == 0 launches nothing.
// dtype is f32, f16 or bf16 for every operand of one call (the ops layer has checked).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda::kernels {

/// y[i] = act(x[i]); y may alias x.
void activation_forward(void* y, const void* x, std::int64_t n, DType dtype, Activation act,
                        cudaStream_t stream);

/// dx[i] (+)= dy[i] * act'(saved[i]); `saved` is y = act(x) for relu/tanh/sigmoid and x for gelu.
void activation_backward(void* dx, const void* dy, const void* saved, std::int64_t n, DType dtype,
                         Activation act, Accumulate acc, cudaStream_t stream);

/// y[i] = relu(x[i] + residual[i]); y may alias either input.
void add_relu_forward(void* y, const void* x, const void* residual, std::int64_t n, DType dtype,
                      cudaStream_t stream);

}  // namespace kiln::cuda::kernels
