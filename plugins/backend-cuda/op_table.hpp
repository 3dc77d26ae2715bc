// What the cuda backend implements: one row per op of KILN_OPS, in its order, with the group that
// runs it and the dtypes it takes. CudaBackend::supports() answers from this table alone.
//
// dnn rows are cuDNN / cuBLAS(Lt) calls (ops/matmul_ops.cpp, conv_ops.cpp, batchnorm_ops.cpp,
// pool_ops.cpp, layout_ops.cpp); kernel rows are Kiln's own kernels (kernels/*.cu). Both take
// the three floating storage types with f32 accumulation, except softmax cross-entropy and the
// optimizers, which are defined over f32 state (as on the cpu backend). Integer and f64 compute
// is not offered. Plain C++ so tests/cuda-kernels checks it without a GPU.
#pragma once

#include <kiln/sdk/op_support.hpp>

#include "kiln/ops.hpp"

namespace kiln::cuda {

enum class OpGroup : std::uint8_t { dnn, kernel };

struct CudaOp {
  Op op;
  OpGroup group;
  sdk::DTypes dtypes;
};

inline constexpr CudaOp kCudaOps[] = {
    {Op::matmul, OpGroup::dnn, sdk::kFloatTypes},
    {Op::bias_grad, OpGroup::dnn, sdk::kFloatTypes},
    {Op::activation_forward, OpGroup::kernel, sdk::kFloatTypes},
    {Op::activation_backward, OpGroup::kernel, sdk::kFloatTypes},
    {Op::add_relu_forward, OpGroup::kernel, sdk::kFloatTypes},
    {Op::dropout_forward, OpGroup::kernel, sdk::kFloatTypes},
    {Op::dropout_backward, OpGroup::kernel, sdk::kFloatTypes},
    {Op::softmax_xent_forward, OpGroup::kernel, sdk::kF32Only},
    {Op::softmax_xent_backward, OpGroup::kernel, sdk::kF32Only},
    {Op::add, OpGroup::kernel, sdk::kFloatTypes},
    {Op::cast, OpGroup::kernel, sdk::kFloatTypes},
    {Op::scale, OpGroup::kernel, sdk::kFloatTypes},
    {Op::check_finite, OpGroup::kernel, sdk::kFloatTypes},
    {Op::sgd_update, OpGroup::kernel, sdk::kF32Only},
    {Op::adam_update, OpGroup::kernel, sdk::kF32Only},
    {Op::conv2d_forward, OpGroup::dnn, sdk::kFloatTypes},
    {Op::conv2d_backward_data, OpGroup::dnn, sdk::kFloatTypes},
    {Op::conv2d_backward_filter, OpGroup::dnn, sdk::kFloatTypes},
    {Op::batchnorm_train_forward, OpGroup::dnn, sdk::kFloatTypes},
    {Op::batchnorm_infer_forward, OpGroup::dnn, sdk::kFloatTypes},
    {Op::batchnorm_backward, OpGroup::dnn, sdk::kFloatTypes},
    {Op::pool2d_forward, OpGroup::dnn, sdk::kFloatTypes},
    {Op::pool2d_backward, OpGroup::dnn, sdk::kFloatTypes},
    {Op::global_avgpool_forward, OpGroup::kernel, sdk::kFloatTypes},
    {Op::global_avgpool_backward, OpGroup::kernel, sdk::kFloatTypes},
    {Op::normalize_image, OpGroup::kernel, sdk::kFloatTypes},
    {Op::convert_layout, OpGroup::dnn, sdk::kFloatTypes},
    // Synchronised batch-norm ([model] sync_bn): Kiln kernels (ops/batchnorm_sync_ops.cpp), f64 sums.
    {Op::batchnorm_stats, OpGroup::kernel, sdk::kFloatTypes},
    {Op::batchnorm_backward_reduce, OpGroup::kernel, sdk::kFloatTypes},
    {Op::batchnorm_backward_elemt, OpGroup::kernel, sdk::kFloatTypes},
    {Op::top_k_hits, OpGroup::kernel, sdk::kF32Only},
    {Op::lerp, OpGroup::kernel, sdk::kF32Only},
};
static_assert(sdk::lists_every_op_once(kCudaOps),
              "kCudaOps needs one row per op of KILN_OPS (kiln/op_table.hpp), in its order");

/// Whether the cuda backend implements `op` for `dtype` (the table's answer).
constexpr bool cuda_supports(Op op, DType dtype) noexcept {
  const CudaOp* row = sdk::op_row(kCudaOps, op);
  return row != nullptr && row->dtypes.has(dtype);
}

}  // namespace kiln::cuda
