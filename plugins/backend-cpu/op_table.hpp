// What the cpu backend implements: one row per op of KILN_OPS, in its order, with the engine
// that runs it and the dtypes it takes. CpuBackend::supports() answers from this table alone.
//
// oneDNN rows take f32, f16 (as storage computed in f32: no CPU here has f16 arithmetic that
// oneDNN 2.6 uses; the f16 edges widen to f32 and round back) and bf16: on oneDNN's bf16 kernels
// where it has them (AVX-512 core and up; cpu_info.hpp), elsewhere widened like f16
// (compute_dtype in ops/dnnl_edge.hpp). Loop rows are plain OpenMP loops through elem.hpp: any
// float storage type, f32 math.
#pragma once

#include <kiln/sdk/op_support.hpp>

#include "kiln/ops.hpp"

namespace kiln::cpu {

enum class Engine : std::uint8_t { onednn, loop };

struct CpuOp {
  Op op;
  Engine engine;
  sdk::DTypes dtypes;
};

inline constexpr CpuOp kCpuOps[] = {
    {Op::matmul, Engine::onednn, sdk::kFloatTypes},
    {Op::bias_grad, Engine::loop, sdk::kFloatTypes},
    {Op::activation_forward, Engine::loop, sdk::kFloatTypes},
    {Op::activation_backward, Engine::loop, sdk::kFloatTypes},
    {Op::add_relu_forward, Engine::loop, sdk::kFloatTypes},
    {Op::dropout_forward, Engine::loop, sdk::kFloatTypes},
    {Op::dropout_backward, Engine::loop, sdk::kFloatTypes},
    {Op::softmax_xent_forward, Engine::loop, sdk::kF32Only},
    {Op::softmax_xent_backward, Engine::loop, sdk::kF32Only},
    {Op::add, Engine::loop, sdk::kFloatTypes},
    {Op::cast, Engine::loop, sdk::kFloatTypes},
    {Op::scale, Engine::loop, sdk::kFloatTypes},
    {Op::check_finite, Engine::loop, sdk::kFloatTypes},
    {Op::sgd_update, Engine::loop, sdk::kF32Only},
    {Op::adam_update, Engine::loop, sdk::kF32Only},
    {Op::conv2d_forward, Engine::onednn, sdk::kFloatTypes},
    {Op::conv2d_backward_data, Engine::onednn, sdk::kFloatTypes},
    {Op::conv2d_backward_filter, Engine::onednn, sdk::kFloatTypes},
    {Op::batchnorm_train_forward, Engine::onednn, sdk::kFloatTypes},
    {Op::batchnorm_infer_forward, Engine::onednn, sdk::kFloatTypes},
    {Op::batchnorm_backward, Engine::onednn, sdk::kFloatTypes},
    {Op::pool2d_forward, Engine::onednn, sdk::kFloatTypes},
    {Op::pool2d_backward, Engine::onednn, sdk::kFloatTypes},
    {Op::global_avgpool_forward, Engine::loop, sdk::kFloatTypes},
    {Op::global_avgpool_backward, Engine::loop, sdk::kFloatTypes},
    {Op::normalize_image, Engine::loop, sdk::kFloatTypes},
    {Op::convert_layout, Engine::loop, sdk::kFloatTypes},
    {Op::batchnorm_stats, Engine::loop, sdk::kFloatTypes},
    {Op::batchnorm_backward_reduce, Engine::loop, sdk::kFloatTypes},
    {Op::batchnorm_backward_elemt, Engine::loop, sdk::kFloatTypes},
    {Op::top_k_hits, Engine::loop, sdk::kF32Only},
    {Op::lerp, Engine::loop, sdk::kF32Only},
};
static_assert(sdk::lists_every_op_once(kCpuOps),
              "kCpuOps needs one row per op of KILN_OPS (kiln/op_table.hpp), in its order");

}  // namespace kiln::cpu
