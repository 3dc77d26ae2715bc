// Argument checks of every CPU op: the SDK's shared OpCheck (kiln/sdk/op_check.hpp), for host
// memory and the name "cpu", and the per-op rules every backend shares (op_args.hpp, op_descs.hpp), so the cpu backend refuses a wrong tensor with the same words as every
// other backend ("cpu backend, matmul: c is f32(64, 10) but must have shape (64, 128); fix the
// arguments the calling layer passes").
#pragma once

#include <kiln/sdk/op_args.hpp>
#include <kiln/sdk/op_check.hpp>
#include <kiln/sdk/op_descs.hpp>

namespace kiln::cpu {

class OpCheck : public sdk::OpCheck {
 public:
  explicit OpCheck(Op op) noexcept : sdk::OpCheck("cpu", sdk::OperandMemory::host, op) {}
};

}  // namespace kiln::cpu
