// Names of ops and activations, for error messages and `kiln plugins show`. Op names are
// generated from KILN_OPS (kiln/op_table.hpp), so an op cannot be added without one.
#include "kiln/ops.hpp"

namespace kiln {

std::string_view activation_name(Activation a) noexcept {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::tanh: return "tanh";
    case Activation::sigmoid: return "sigmoid";
    case Activation::gelu: return "gelu";
  }
  return "unknown";
}

std::string_view op_name(Op op) noexcept {
  switch (op) {
#define KILN_OP_NAME_CASE(name) \
  case Op::name: return #name;
    KILN_OPS(KILN_OP_NAME_CASE)
#undef KILN_OP_NAME_CASE
  }
  return "unknown";
}

}  // namespace kiln
