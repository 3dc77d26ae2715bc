// Argument checks of the cuda backend's kernel-group ops: the SDK's shared OpCheck
// (kiln/sdk/op_check.hpp) for device memory and the name "cuda", so a failure reads as on every
// backend ("cuda backend, <op>: <what>; fix the arguments the calling layer passes"). Image
// tensors may be row-major (NCHW) or nhwc (usable_image), and element-wise ops pair elements by
// memory position, so all operands of one call must share a layout (same_layout).
#pragma once

#include <kiln/sdk/op_check.hpp>

namespace kiln::cuda {

class KernelCheck : public sdk::OpCheck {
 public:
  explicit KernelCheck(Op op) noexcept : sdk::OpCheck("cuda", sdk::OperandMemory::device, op) {}
};

}  // namespace kiln::cuda
