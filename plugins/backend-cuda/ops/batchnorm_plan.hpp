// What the batch-norm op files share about CudaBackend's batch-norm plan (defined in
// batchnorm_ops.cpp, next to the cuDNN calls that fill it): the synchronised batch-norm ops
// (batchnorm_sync_ops.cpp) run Kiln kernels, not cuDNN, and need only the plan's descriptor.
#pragma once

#include <kiln/sdk/op_check.hpp>

#include "kiln/backend.hpp"
#include "kiln/ops.hpp"

namespace kiln::cuda {

/// The descriptor of a plan made by CudaBackend::plan_batchnorm; any other plan fails through
/// `check` ("the plan passed was not made by the cuda backend's plan_batchnorm; ...").
const BatchNormDesc& batchnorm_plan_desc(const sdk::OpCheck& check, OpPlan& plan);

}  // namespace kiln::cuda
